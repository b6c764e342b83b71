#!/usr/bin/env bash
# One entry point for a fresh clone: installs pnpm 9 if missing (locally, under .cache/tools),
# installs dependencies, builds, then runs what was asked.
#   scripts/dev.sh up      start the single-machine cluster (orchestratord + one pool-managerd)
#   scripts/dev.sh test    lint + every test suite (what CI runs)
#   scripts/dev.sh bench   the benchmarks
set -euo pipefail
cd "$(dirname "$0")/.."

cmd="${1:-}"
case "$cmd" in
  up|test|bench) shift ;;
  *) echo "usage: scripts/dev.sh up|test|bench [args]" >&2; exit 2 ;;
esac

node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then echo "Node.js >= 20 is required (found $(node --version))" >&2; exit 1; fi

# pnpm 9: use one on PATH if it is 9.x, else install it into the project (no global changes).
if command -v pnpm >/dev/null 2>&1 && [ "$(pnpm --version | cut -d. -f1)" = "9" ]; then
  PNPM=(pnpm)
else
  if [ ! -x .cache/tools/node_modules/.bin/pnpm ]; then
    echo "==> installing pnpm 9 into .cache/tools"
    npm install --silent --no-audit --no-fund --prefix .cache/tools pnpm@9 >/dev/null
  fi
  PNPM=("$PWD/.cache/tools/node_modules/.bin/pnpm")
  export PATH="$PWD/.cache/tools/node_modules/.bin:$PATH"
fi

echo "==> pnpm install"
"${PNPM[@]}" install --frozen-lockfile --reporter=append-only
echo "==> build"
"${PNPM[@]}" run build

case "$cmd" in
  up)    exec "${PNPM[@]}" run start "$@" ;;
  test)
    echo "==> lint"
    "${PNPM[@]}" run lint
    echo "==> test"
    exec "${PNPM[@]}" run test "$@" ;;
  bench) exec "${PNPM[@]}" run bench "$@" ;;
esac
