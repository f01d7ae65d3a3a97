#!/usr/bin/env bash
# Runs the browser test; exits 77 (CTest: skipped) when node, npm or chromium is missing,
# or when playwright-core cannot be installed (no network). Installs it from
# package-lock.json into this folder's node_modules/ (not committed) on first use.
#   run.sh HPCSERVER DBASE_DIR OUT
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIPPED: $*"; exit 77; }
command -v node >/dev/null || skip "node is not installed"
[ -x /usr/bin/chromium ] || skip "/usr/bin/chromium is not installed (apt-get install chromium)"
if [ ! -d "$here/node_modules/playwright-core" ]; then
  command -v npm >/dev/null || skip "npm is not installed"
  (cd "$here" && npm ci --no-audit --no-fund >/dev/null 2>&1) || skip "npm ci failed (offline?)"
fi
exec node "$here/viewer.test.mjs" "$@"
