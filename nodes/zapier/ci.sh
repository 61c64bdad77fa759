#!/usr/bin/env bash
# CI entry point of the Zapier app (nodes/zapier):
#   1. npm ci from the committed lockfile (zapier-platform-core);
#   2. the tests on the machine's Node 20, through Zapier's createAppTester, against a REAL key
#      store (${KEYSTORE_BIN:-<repo>/.venv/bin/keystore} on a free loopback port, started and
#      stopped by nodes/test-support/with-keystore.js) and a local effect sink;
#   3. `zapier-platform validate --without-style` (offline) with the Zapier CLI on Node 22,
#      both installed from tools/package-lock.json into a cache outside the clone, keyed by
#      their versions: ${KEYSTORE_CI_CACHE:-$HOME/.cache/keystore-ci}/zapier-cli-<v>-node-<v>-<hash>/
# Needs: node >= 20 and npm on PATH, the key store's venv (scripts/test creates it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../test-support/ci-prelude.sh
source "$here/../test-support/ci-prelude.sh"
# Nothing here may talk to Zapier's servers: no analytics, no update check, no log shipping.
export DISABLE_ZAPIER_ANALYTICS=1 NO_UPDATE_NOTIFIER=1
unset LOGGING_TOKEN LOGGING_ENDPOINT

step "npm ci (committed lockfile)"
cd "$here"
npm ci --no-audit --no-fund --loglevel=error

step "tests on Node $(node --version), against a real key store and a local effect sink"
npm test

step "Zapier CLI on Node 22 (cached outside the clone)"
tools="$here/tools"
cli_version=$(node -p 'require(process.argv[1]).dependencies["zapier-platform-cli"]' "$tools/package.json")
node22_version=$(node -p 'require(process.argv[1]).dependencies.node' "$tools/package.json")
lock_hash=$(sha256sum "$tools/package-lock.json" | cut -c1-12)
cache_root="${KEYSTORE_CI_CACHE:-$HOME/.cache/keystore-ci}"
cache="$cache_root/zapier-cli-$cli_version-node-$node22_version-$lock_hash"
if [ -f "$cache/.complete" ]; then
  echo "using $cache" >&2
else
  echo "installing zapier-platform-cli $cli_version and node $node22_version into $cache" >&2
  mkdir -p "$cache_root"
  partial="$cache.partial.$$"
  rm -rf "$partial"
  mkdir -p "$partial"
  cp "$tools/package.json" "$tools/package-lock.json" "$partial/"
  # A cold install is large (about 370 MB, most of it the Node 22 binary and the CLI's
  # build tools); the timeout keeps a stalled registry from eating the CI budget.
  (cd "$partial" && timeout 900 npm ci --no-audit --no-fund --loglevel=error)
  touch "$partial/.complete"
  rm -rf "$cache"
  mv "$partial" "$cache"
fi
node22="$cache/node_modules/node/bin/node"
echo "CLI runs on Node $("$node22" --version)" >&2

step "zapier-platform validate --without-style (offline)"
"$node22" "$cache/node_modules/zapier-platform-cli/src/bin/run" validate --without-style

echo "nodes/zapier/ci.sh: passed in $(( $(date +%s) - started )) s" >&2
