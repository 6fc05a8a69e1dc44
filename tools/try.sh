#!/usr/bin/env bash
# Interim main job until `ckpt demo` exists: set up on a fresh machine (pnpm, install, build) and
# run ckpt on real local files in a scratch directory — write a small bf16 model with
# @ckpt/tensors, inspect it, and qualify a file:// store.
#   bash tools/try.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v pnpm >/dev/null || npm install -g pnpm@10
pnpm install --frozen-lockfile
pnpm turbo run build --filter @ckpt/cli...
work=$(mktemp -d /tmp/ckpt-try.XXXXXX)
echo "scratch directory: $work"
node tools/try-model.mjs "$work/iter_000000100/model.pt"
ckpt() { node apps/cli/dist/bin.js "$@"; }
ckpt inspect "$work/iter_000000100/model.pt" --sha256
ckpt doctor store "file://$work/archive"
