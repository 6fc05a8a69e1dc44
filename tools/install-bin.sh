#!/usr/bin/env bash
# Puts `ckpt` and `ckpt-trainer` on PATH: links <prefix>/bin/ckpt and <prefix>/bin/ckpt-trainer to
# the built apps of this checkout (so a rebuild is picked up without reinstalling).
#   bash tools/install-bin.sh [prefix]     default prefix: ~/.local (bin/ is created if missing)
# Build first (`pnpm build`, or `pnpm turbo run build --filter=@ckpt/cli --filter=@ckpt/trainer-binding`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-$HOME/.local}"
mkdir -p "$prefix/bin"
for entry in ckpt:apps/cli ckpt-trainer:apps/trainer-binding; do
  name="${entry%%:*}"
  target="$root/${entry#*:}/dist/bin.js"
  if [ ! -x "$target" ]; then
    echo "install-bin: $target is missing; build first: pnpm build" >&2
    exit 1
  fi
  ln -sfn "$target" "$prefix/bin/$name"
  echo "$prefix/bin/$name -> $target"
done
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "install-bin: $prefix/bin is not on PATH; add it: export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
