#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine, set-up included:
#   bash tools/test-all.sh
# Installs pnpm and the Debian packages the tests use (PyTorch for torch.save interop, Ceph's
# RADOS Gateway as a real S3 server), installs and builds the workspace, lints, type-checks,
# starts the S3 server on 127.0.0.1, runs every package's tests, stops the server, and ends
# with one line: `ci: N passed, N failed`.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
log() { echo "[test-all +${SECONDS}s] $*" >&2; }

# --- toolchain: pnpm from the npm registry, Debian packages through apt ---------------------
if ! command -v pnpm >/dev/null; then
  log "installing pnpm"
  npm install -g pnpm@10 >&2 || exit 1
fi
apt_packages=(python3-torch python3-numpy radosgw ceph-mon ceph-osd ceph-common)
missing=()
for p in "${apt_packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt=(apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 -o DPkg::Options::=--force-unsafe-io)
  "${apt[@]}" "${missing[@]}" >&2 || { apt-get update -q >&2 && "${apt[@]}" "${missing[@]}" >&2; } || exit 1
fi
/usr/bin/python3 -c 'import torch' || { log "PyTorch is not importable by /usr/bin/python3"; exit 1; }

# --- workspace -----------------------------------------------------------------------------
log "pnpm install"
pnpm install --frozen-lockfile >&2 || exit 1
log "build"
pnpm turbo run build >&2 || exit 1
log "lint and layer check"
pnpm lint >&2 || exit 1
log "typecheck"
pnpm turbo run typecheck >&2 || exit 1

# --- services ------------------------------------------------------------------------------
export CEPH_S3_DIR=${CEPH_S3_DIR:-/tmp/ckpt-ci-ceph}
log "starting the S3 server (Ceph RGW) on 127.0.0.1"
exports=$(bash tools/s3-server/ceph-s3.sh start) || exit 1
eval "$exports"
trap 'bash tools/s3-server/ceph-s3.sh stop >&2 || true' EXIT

# --- tests ---------------------------------------------------------------------------------
report_dir=$(mktemp -d /tmp/ckpt-test-reports.XXXXXX)
log "tests (reports in $report_dir)"
CKPT_REPORT_DIR=$report_dir NODE_NO_WARNINGS=1 pnpm turbo run test --force --concurrency=1 >&2
runner_exit=$?
node tools/ci-summary.mjs "$report_dir" "$runner_exit"
