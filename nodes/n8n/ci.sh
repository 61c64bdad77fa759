#!/usr/bin/env bash
# CI for the n8n community node package (nodes/n8n): install, lint, build, unit tests, then the
# end-to-end tests in a real n8n 2.8.4 against a key store the tests start themselves.
#   bash nodes/n8n/ci.sh
# Environment:
#   KEYSTORE_BIN       the key store's CLI (default: <repo>/.venv/bin/keystore, made by scripts/test)
#   KEYSTORE_CI_CACHE  cache folder for the n8n install (default: ~/.cache/keystore-ci)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../test-support/ci-prelude.sh
source "$here/../test-support/ci-prelude.sh" # $repo, $started, step(), KEYSTORE_BIN, Node >= 20
cd "$here"
export CI="${CI:-true}" # n8n-node's spinners print plain lines instead of redrawing
fail() { printf '\n%s/ci.sh: FAILED: %s\n' "$package" "$*" >&2; exit 1; }

# Runs a command with its output in a log that is shown only when it fails.
quiet() {
  local log
  log="$(mktemp)"
  if ! "$@" >"$log" 2>&1; then
    tail -n 80 "$log" >&2
    rm -f "$log"
    fail "$*"
  fi
  rm -f "$log"
}

step "npm ci (committed lockfile)"
# --prefer-offline: the lockfile pins every integrity, so a cached tarball needs no revalidation
timeout 900 npm ci --prefer-offline --no-audit --no-fund --loglevel=error || fail "npm ci"

step "lint (@n8n/node-cli: n8n's community node rules)"
timeout 300 npx --no-install n8n-node lint || fail "lint"

step "build"
rm -rf dist
quiet timeout 300 npx --no-install n8n-node build
[ -f dist/nodes/IdempotencyGuard/IdempotencyGuard.node.js ] || fail "build produced no Guard node"

step "package: n8n's package.json fields, and a packed file list without build leftovers"
node scripts/check-package.js || fail "the package is not ready to publish (scripts/check-package.js)"

step "unit tests (node logic; execute() against a real key store)"
timeout 600 node --test --test-timeout=120000 test/unit/ || fail "unit tests"

step "n8n 2.8.4 (cached outside the clone)"
N8N_BIN="$(scripts/install-n8n.sh)" || fail "installing n8n"
export N8N_BIN

step "end-to-end tests in n8n $("$N8N_BIN" --version)"
timeout 1500 node --test --test-concurrency=1 --test-timeout=900000 test/e2e/ || fail "e2e tests"

echo "$package/ci.sh: passed in $(( $(date +%s) - started )) s" >&2
