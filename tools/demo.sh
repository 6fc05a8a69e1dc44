#!/usr/bin/env bash
# The main job on a fresh machine: install pnpm if missing, install the workspace, build the CLI
# and the libraries it uses, then run `ckpt demo` (a real small training job and the whole life of
# its checkpoints, in ./ckpt-demo). Needs Node 20 and the npm registry; no Python, no S3 server.
#   bash tools/demo.sh                      # the demo, human output
#   bash tools/demo.sh --fault torn --json  # any `ckpt demo` option; with --json stdout is the report
# Set-up prints one line per phase on stderr; what the installs and the build print goes to a log
# file it names (CKPT_DEMO_LOG, default ckpt-demo-setup.log beside the demo directory), whose last
# lines are shown when a phase fails. PNPM_STORE_DIR selects the pnpm store (the fresh-clone test
# uses an empty one); CKPT_DEMO_DIR the demo directory.
set -euo pipefail
cd "$(dirname "$0")/.."
demo_dir=${CKPT_DEMO_DIR:-ckpt-demo}
case $demo_dir in
  /*) setup_log=${CKPT_DEMO_LOG:-${demo_dir%/}-setup.log} ;;
  *) setup_log=${CKPT_DEMO_LOG:-$PWD/${demo_dir%/}-setup.log} ;;
esac
: >"$setup_log"
log() { echo "[demo.sh +${SECONDS}s] $*" >&2; }
# phase <what> <command...>: one line, the command's output in the log; a failure shows its end.
phase() {
  local what=$1
  shift
  log "$what"
  if ! "$@" >>"$setup_log" 2>&1; then
    log "FAILED: $what; the last lines of $setup_log:"
    tail -n 25 "$setup_log" >&2
    exit 1
  fi
}
log "set-up output goes to $setup_log"
if ! command -v pnpm >/dev/null; then
  phase "installing pnpm" npm install -g pnpm@10
fi
phase "pnpm install" pnpm install --frozen-lockfile ${PNPM_STORE_DIR:+--store-dir "$PNPM_STORE_DIR"}
phase "build the ckpt CLI and its libraries" pnpm turbo run build --filter @ckpt/cli...
log "ckpt demo"
exec node apps/cli/dist/bin.js demo --dir "$demo_dir" "$@"
