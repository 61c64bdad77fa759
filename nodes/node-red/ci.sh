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
# shellcheck source=../test-support/ci-prelude.sh
source "$here/../test-support/ci-prelude.sh"

step "npm ci (committed lockfile)"
cd "$here"
npm ci --no-audit --no-fund --loglevel=error

step "tests on Node $(node --version) with node-red $(node -p 'require("node-red/package.json").version'), against a real key store"
npm test

echo "nodes/node-red/ci.sh: passed in $(( $(date +%s) - started )) s" >&2
