# Sourced by the scripts that use podman: its settings, and the cache outside the clone.
# shellcheck shell=bash
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CONTAINERS_CONF="$repo/scripts/podman/containers.conf"
CACHE="${KEYSTORE_CI_CACHE:-$HOME/.cache/keystore-ci}"
mkdir -p "$CACHE"
# The tag the Containerfile's FROM names: here it is made from Debian's packages, elsewhere
# it is pulled from a registry as usual.
BASE_IMAGE="docker.io/library/debian:bookworm-slim"
IMAGE="${KEYSTORE_IMAGE:-localhost/keystore-service:ci}"
# pip inside a build reaches the package index only with this machine's CA bundle.
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

# apt_install PACKAGE...: Debian's packages, installed when a command is missing.
apt_install() {
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "missing: $*; install Debian's packages: apt-get install $*" >&2
    return 1
  fi
  echo "installing Debian's $*" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
