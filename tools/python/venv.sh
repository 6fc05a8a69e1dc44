#!/usr/bin/env bash
# Builds (or refreshes) the test interpreter: a virtual environment at <repo>/.venv holding exactly
# tools/python/requirements.txt, installed from the machine's local package index. Prints the
# interpreter's path. Tests find it through CKPT_PYTHON (default <repo>/.venv/bin/python).
#   bash tools/python/venv.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=$root/.venv
requirements=$root/tools/python/requirements.txt
stamp=$venv/.ckpt-requirements.sha256
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
echo "[venv] building $venv from $requirements" >&2
rm -rf "$venv"
python3 -m venv "$venv"
# The machine's pip names its local index as an extra index; asking only that index keeps pip from
# retrying an unreachable pypi.org for every package (minutes, offline).
local_index=$(pip config get global.extra-index-url 2>/dev/null | awk '{print $1}' || true)
if [ -n "$local_index" ]; then export PIP_INDEX_URL=$local_index; fi
# (pip warns once per package about the index that does not hold it: noise, filtered out.)
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$requirements" 2>&1 |
  grep -v 'is ignored: it is neither a file nor a directory' >&2 || true
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "[venv] pip install failed" >&2; exit 1; }
"$venv/bin/python" -c 'import torch, torch.distributed.checkpoint, safetensors, transformers' >&2
echo "$want" >"$stamp"
echo "$venv/bin/python"
