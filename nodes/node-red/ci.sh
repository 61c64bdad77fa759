#!/usr/bin/env bash
# CI entry point of the Node-RED package (nodes/node-red):
#   1. npm ci from the committed lockfile (node-red 4.1.8 and node-red-node-test-helper, dev
#      dependencies only: the package itself has no runtime dependencies);
#   2. the tests on the machine's Node 20, with the flows running in-process in Node-RED,
#      against a REAL key store (${KEYSTORE_BIN:-<repo>/.venv/bin/keystore} on a free loopback
#      port, started and stopped by nodes/test-support/with-keystore.js) and a local effect sink.
# Needs: node >= 20 and npm on PATH, the key store's venv (scripts/test creates it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
started=$(date +%s)
step() { printf '\n==> nodes/node-red: %s (%s s)\n' "$*" "$(( $(date +%s) - started ))" >&2; }

export KEYSTORE_BIN="${KEYSTORE_BIN:-$repo/.venv/bin/keystore}"
if [ ! -x "$KEYSTORE_BIN" ]; then
  echo "nodes/node-red/ci.sh: no key store at $KEYSTORE_BIN (run scripts/test once, or set KEYSTORE_BIN)" >&2
  exit 1
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "nodes/node-red/ci.sh: needs Node 20 or later on PATH, found $(node --version)" >&2
  exit 1
fi

step "npm ci (committed lockfile)"
cd "$here"
npm ci --no-audit --no-fund --loglevel=error

step "tests on Node $(node --version) with node-red $(node -p 'require("node-red/package.json").version'), against a real key store"
npm test

echo "nodes/node-red/ci.sh: passed in $(( $(date +%s) - started )) s" >&2
