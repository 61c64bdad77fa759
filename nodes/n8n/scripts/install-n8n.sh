#!/usr/bin/env bash
# Install n8n once per version into the CI cache, outside the clone, and print its bin dir.
#   scripts/install-n8n.sh [version]      (default 2.8.4: the newest n8n that runs on Node 20)
# A finished install is marked by .installed; a half-finished one is wiped and redone.
set -euo pipefail
version="${1:-2.8.4}"
dir="${KEYSTORE_CI_CACHE:-$HOME/.cache/keystore-ci}/n8n-$version"
if [ ! -f "$dir/.installed" ]; then
  echo "install-n8n: installing n8n@$version into $dir (several minutes, once)" >&2
  rm -rf "$dir"
  mkdir -p "$dir"
  # n8n 2.8.4 depends on an xlsx tarball hosted outside the npm registry; the registry's
  # xlsx 0.18.5 has the same API and lets the install succeed offline from cdn.sheetjs.com.
  cat >"$dir/package.json" <<JSON
{
  "name": "keystore-ci-n8n",
  "private": true,
  "dependencies": { "n8n": "$version" },
  "overrides": { "xlsx": "0.18.5" }
}
JSON
  (cd "$dir" && timeout 1800 npm install --no-audit --no-fund --loglevel=error >&2)
  "$dir/node_modules/.bin/n8n" --version >&2
  touch "$dir/.installed"
fi
echo "$dir/node_modules/.bin"
