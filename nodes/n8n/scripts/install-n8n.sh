#!/usr/bin/env bash
# Install the n8n that the e2e tests run, once, into the CI cache outside the clone, and print
# the path of its n8n executable on stdout.
#   scripts/install-n8n.sh
# The install is keyed by n8n's version (the cache folder's name) and checked against the
# committed lockfile (test/e2e/n8n-install/): a half-finished or outdated install is redone.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
spec="$here/test/e2e/n8n-install"
version="$(node -p "require('$spec/package.json').dependencies.n8n")"
dir="${KEYSTORE_CI_CACHE:-$HOME/.cache/keystore-ci}/n8n-$version"
# The files' contents only: sha256sum's listing would also carry their paths, and every clone
# (CI clones afresh) would then miss the cache.
stamp="$(cat "$spec/package.json" "$spec/package-lock.json" | sha256sum | cut -c1-16)"

if [ "$(cat "$dir/.installed" 2>/dev/null || true)" != "$stamp" ]; then
  echo "install-n8n: installing n8n@$version into $dir (several minutes, once per version)" >&2
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$spec/package.json" "$spec/package-lock.json" "$dir/"
  # n8n@2.8.4 depends on an xlsx tarball outside the npm registry; the lockfile pins the
  # registry's xlsx 0.18.5 instead (the "overrides" in package.json). sqlite3 compiles here.
  (cd "$dir" && timeout 2700 npm ci --prefer-offline --no-audit --no-fund --loglevel=error >&2)
  "$dir/node_modules/.bin/n8n" --version >&2
  echo "$stamp" >"$dir/.installed"
else
  echo "install-n8n: reusing $dir" >&2
fi
echo "$dir/node_modules/.bin/n8n"
