# Sourced by nodes/*/ci.sh after `set -euo pipefail`, with $here set to the package folder:
# defines $repo, $started and step(), exports KEYSTORE_BIN (default <repo>/.venv/bin/keystore)
# and stops early, saying why, without a key store or without Node 20+ on PATH.
repo="$(cd "$here/../.." && pwd)"
package="nodes/$(basename "$here")"
started=$(date +%s)
step() { printf '\n==> %s: %s (%s s)\n' "$package" "$*" "$(( $(date +%s) - started ))" >&2; }

export KEYSTORE_BIN="${KEYSTORE_BIN:-$repo/.venv/bin/keystore}"
if [ ! -x "$KEYSTORE_BIN" ]; then
  echo "$package/ci.sh: no key store at $KEYSTORE_BIN (run scripts/test once, or set KEYSTORE_BIN)" >&2
  exit 1
fi
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  echo "$package/ci.sh: needs Node 20 or later on PATH, found $(node --version)" >&2
  exit 1
fi
