#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine, set-up included:
#   bash tools/test-all.sh
# Installs pnpm and the Debian packages the tests use (PyTorch for torch.save interop, Ceph's
# RADOS Gateway as a real S3 server, chromium for `ckpt ui`'s browser tests), installs and builds
# the workspace, lints, type-checks, starts the S3 server on 127.0.0.1, runs every package's
# tests, stops the server, and ends with one line: `ci: N passed, N failed`. Anything the tests
# leave in /tmp is named and counts as one failed test.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
log() { echo "[test-all +${SECONDS}s] $*" >&2; }
# A set-up step that fails still ends with the closing line CI reads.
fail_setup() { log "FAILED: $*"; echo "ci: 0 passed, 1 failed"; exit 1; }

# --- toolchain: pnpm from the npm registry, Debian packages through apt ---------------------
if ! command -v pnpm >/dev/null; then
  log "installing pnpm"
  npm install -g pnpm@10 >&2 || fail_setup "npm install -g pnpm@10"
fi
apt_packages=(python3-torch python3-numpy radosgw ceph-mon ceph-osd ceph-common chromium)
missing=()
for p in "${apt_packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt=(apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 -o DPkg::Options::=--force-unsafe-io)
  "${apt[@]}" "${missing[@]}" >&2 || { apt-get update -q >&2 && "${apt[@]}" "${missing[@]}" >&2; } ||
    fail_setup "apt-get install ${missing[*]}"
fi
/usr/bin/python3 -c 'import torch' || fail_setup "PyTorch is not importable by /usr/bin/python3"
# PyTorch 2 (DCP, transformers, safetensors) from the machine's local package index, pinned in
# tools/python/requirements.txt; Debian's torch 1.13 above stays for the old-format tests.
log "Python test environment (.venv)"
CKPT_PYTHON=$(bash tools/python/venv.sh) || fail_setup "build .venv (tools/python/venv.sh)"
export CKPT_PYTHON

# --- workspace -----------------------------------------------------------------------------
log "pnpm install"
pnpm install --frozen-lockfile >&2 || fail_setup "pnpm install"
log "build"
pnpm turbo run build >&2 || fail_setup "build"
log "api reports"
pnpm api:check >&2 || fail_setup "api reports (a package's surface changed: pnpm api:update, then commit etc/)"
log "lint and layer check"
# publint packs into a mkdtemp directory it never removes: give it one that is removed here.
lint_tmp=$(mktemp -d -t ckpt-lint-XXXXXX)
TMPDIR=$lint_tmp pnpm lint >&2 || { rm -rf "$lint_tmp"; fail_setup "lint (biome, publint, attw, layer check)"; }
rm -rf "$lint_tmp"
log "typecheck"
pnpm turbo run typecheck >&2 || fail_setup "typecheck"

# --- services ------------------------------------------------------------------------------
export CEPH_S3_DIR=${CEPH_S3_DIR:-/tmp/ckpt-ci-ceph}
log "starting the S3 server (Ceph RGW) on 127.0.0.1"
exports=$(bash tools/s3-server/ceph-s3.sh start) || fail_setup "start the S3 server"
eval "$exports"
trap 'bash tools/s3-server/ceph-s3.sh stop >&2 || true' EXIT

# --- tests ---------------------------------------------------------------------------------
# Every package's suite runs even when an earlier one fails (--no-bail), one package at a time
# (each vitest already uses both cores); the build above is reused, not redone.
# The fresh-clone test (test/fresh-clone) clones HEAD and runs the README's main job from scratch.
# The docs checks run there too, as tests of test/docs: the CLI reference, the examples, the error
# codes and `pnpm test-claims` (every Guarantees item names a test that exists).
export CKPT_FRESH_CLONE=${CKPT_FRESH_CLONE:-1}
report_dir=$(mktemp -d /tmp/ckpt-test-reports.XXXXXX)
# torch 2 makes its inductor cache directory (/tmp/torchinductor_<user>) when a test's ranks start;
# it lives under the report directory instead, so nothing stays in /tmp.
export TORCHINDUCTOR_CACHE_DIR=$report_dir/torchinductor
# /tmp before the tests and after them (the S3 server stopped): a new entry is litter, except the
# run's own services (the S3 server's state, the report directory).
ls -A /tmp >"$report_dir/tmp-before.txt"
log "tests (reports in $report_dir)"
CKPT_REPORT_DIR=$report_dir NODE_NO_WARNINGS=1 pnpm -r --workspace-concurrency=1 --no-bail run test >&2
runner_exit=$?
bash tools/s3-server/ceph-s3.sh stop >&2 || true
trap - EXIT
ls -A /tmp >"$report_dir/tmp-after.txt"
node tools/ci-summary.mjs "$report_dir" "$runner_exit" \
  --tmp "$report_dir/tmp-before.txt" "$report_dir/tmp-after.txt" "$(basename "$report_dir")" "$(basename "$CEPH_S3_DIR")"
summary_exit=$?
# The reports (and the coverage under them) were for the summary above: nothing stays in /tmp.
rm -rf "$report_dir"
exit "$summary_exit"
