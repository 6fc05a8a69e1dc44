#!/usr/bin/env bash
# The main job on a fresh machine: install pnpm if missing, install the workspace, build the CLI
# and the libraries it uses, then run `ckpt demo` (a real small training job and the whole life of
# its checkpoints, in ./ckpt-demo). Needs Node 20 and the npm registry; no Python, no S3 server.
#   bash tools/demo.sh                      # the demo, human output
#   bash tools/demo.sh --fault torn --json  # any `ckpt demo` option; with --json stdout is the report
# Set-up output goes to stderr. PNPM_STORE_DIR selects the pnpm store (the fresh-clone test uses
# an empty one); CKPT_DEMO_DIR the demo directory.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "[demo.sh +${SECONDS}s] $*" >&2; }
if ! command -v pnpm >/dev/null; then
  log "installing pnpm"
  npm install -g pnpm@10 >&2
fi
log "pnpm install"
pnpm install --frozen-lockfile ${PNPM_STORE_DIR:+--store-dir "$PNPM_STORE_DIR"} >&2
log "build the ckpt CLI and its libraries"
pnpm turbo run build --filter @ckpt/cli... >&2
log "ckpt demo"
exec node apps/cli/dist/bin.js demo --dir "${CKPT_DEMO_DIR:-ckpt-demo}" "$@"
