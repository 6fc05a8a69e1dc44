#!/usr/bin/env bash
# Throw-away S3 server for ckpt's integration tests: a one-host Ceph cluster (one monitor, one
# in-memory OSD, no manager) with the RADOS Gateway answering the S3 API on 127.0.0.1.
# Debian 12 ships Ceph 16.2 (pacific) as radosgw, ceph-mon, ceph-osd, ceph-common.
#
#   tools/s3-server/ceph-s3.sh start    install the packages if missing, start the daemons, create
#                                       the S3 user, print `export NAME=value` lines on stdout
#   tools/s3-server/ceph-s3.sh stop     stop exactly the daemons this script started, remove the dir
#   tools/s3-server/ceph-s3.sh status   list the recorded daemons, alive or dead, with their RSS
#
#   eval "$(tools/s3-server/ceph-s3.sh start)"; trap 'tools/s3-server/ceph-s3.sh stop' EXIT
#
# Logs go to stderr; stdout carries only the export lines. Every file the cluster writes (config,
# monitor store, OSD superblock, logs, admin sockets, the PID list) lives under $CEPH_S3_DIR;
# nothing goes to /etc/ceph, /var/lib/ceph or /var/log/ceph, and systemd is not involved.
# `start` creates the S3 user and nothing else: the bucket it names is for the caller to create.
#
# Settings (environment):
#   CEPH_S3_DIR         state directory, absolute, removed by stop   (/tmp/ceph-s3)
#   CEPH_S3_PORT        S3 port of the gateway                        (7480)
#   CEPH_S3_MON_PORT    monitor port (msgr2)                          (3300)
#   CEPH_S3_MEM_BYTES   OSD capacity; the data is held in RAM          (4 GiB)
#   CEPH_S3_ACCESS_KEY, CEPH_S3_SECRET_KEY   the test user's keys (fixed test values by default)
#   CEPH_S3_BUCKET      bucket name printed as CKPT_TEST_S3_BUCKET     (ckpt-test)
#   CEPH_S3_NO_INSTALL=1  never call apt-get
# Two instances with different directories and ports can run side by side; the OSD takes free
# ports in 6800-7300 by itself.
set -euo pipefail

STATE_DIR=${CEPH_S3_DIR:-/tmp/ceph-s3}
S3_PORT=${CEPH_S3_PORT:-7480}
MON_PORT=${CEPH_S3_MON_PORT:-3300}
OSD_BYTES=${CEPH_S3_MEM_BYTES:-4294967296}
KEY_ID=${CEPH_S3_ACCESS_KEY:-TESTACCESSKEY0000001}
KEY_SECRET=${CEPH_S3_SECRET_KEY:-testsecretkey0000000000000000000000000001}
TEST_BUCKET=${CEPH_S3_BUCKET:-ckpt-test}
CONF_FILE=$STATE_DIR/ceph.conf
PID_FILE=$STATE_DIR/pids

# start and stop remove $STATE_DIR: accept only an absolute path at least two levels deep.
case "$STATE_DIR" in
  /*/*) ;;
  *) echo "ceph-s3: CEPH_S3_DIR must be an absolute path such as /tmp/ceph-s3 (got '$STATE_DIR')" >&2; exit 2 ;;
esac

note() { echo "[ceph-s3 ${SECONDS}s] $*" >&2; }
fail() { note "error: $*"; exit 1; }

ensure_packages() {
  [ "${CEPH_S3_NO_INSTALL:-0}" = 1 ] && return 0
  local tool need=0
  for tool in ceph-mon ceph-osd radosgw radosgw-admin monmaptool uuidgen curl; do
    command -v "$tool" >/dev/null 2>&1 || need=1
  done
  [ "$need" = 0 ] && return 0
  local pkgs=(radosgw ceph-mon ceph-osd ceph-common)
  # Naming curl when it is already installed would upgrade it along with the fresh lists.
  command -v curl >/dev/null 2>&1 || pkgs+=(curl)
  note "installing ${pkgs[*]} with apt-get (about 35-45 s)"
  export DEBIAN_FRONTEND=noninteractive
  # --force-unsafe-io skips dpkg's per-file fsync: about a quarter faster, harmless on a CI box.
  local install=(apt-get install -y --no-install-recommends -o DPkg::Options::=--force-unsafe-io)
  if ! "${install[@]}" "${pkgs[@]}" >&2; then
    note "install failed; refreshing the package lists once and retrying"
    apt-get update >&2
    "${install[@]}" "${pkgs[@]}" >&2
  fi
}

ceph_cli() { ceph -c "$CONF_FILE" --connect-timeout 10 "$@"; }

write_config() {
  cat >"$CONF_FILE" <<CONF
[global]
fsid = $1
mon host = [v2:127.0.0.1:$MON_PORT]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
# No cephx: the cluster lives on loopback for the length of a test run.
auth cluster required = none
auth service required = none
auth client required = none
# A single OSD holding a single copy of everything.
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
# The monitor batches map changes for paxos_propose_interval (1 s by default) and the gateway
# creates its pools one by one; short intervals bring start from ~15 s down to ~3 s.
paxos propose interval = 0.05
paxos min wait = 0.01
# Keep every path under the state directory.
run dir = $STATE_DIR/run
admin socket = $STATE_DIR/run/\$name.asok
log file = $STATE_DIR/log/\$name.log
# Without this the monitor still writes /var/log/ceph/ceph.log and ceph.audit.log.
mon cluster log file = $STATE_DIR/log/cluster.log
mon data = $STATE_DIR/mon/\$name
osd data = $STATE_DIR/osd/\$name
rgw data = $STATE_DIR/rgw/\$name
crash dir = $STATE_DIR/crash
exec dir = $STATE_DIR/run
# Do not refuse to run because a CI disk is fairly full.
mon data avail warn = 2
mon data avail crit = 1

[osd]
osd objectstore = memstore
memstore device bytes = $OSD_BYTES
osd crush update on start = true

[client.rgw.a]
# radosgw defaults to ms_mon_client_mode=secure, which needs cephx; with auth "none" it would
# retry "get_initial_auth_request returned -13" forever. Allow crc.
ms mon client mode = crc secure
rgw frontends = beast endpoint=127.0.0.1:$S3_PORT
rgw dns name = localhost
# memstore keeps data in RAM: collect deleted and overwritten tails after ~30 s, not rgw's 2 h.
rgw gc obj min wait = 30
rgw gc processor period = 15
CONF
}

# launch NAME COMMAND...: run a daemon in the foreground as a background job; record "pid name exe".
launch() {
  local name=$1
  shift
  "$@" </dev/null >>"$STATE_DIR/log/$name.stdout" 2>&1 &
  echo "$! $name $1" >>"$PID_FILE"
  note "$name running as pid $!"
}

# is_ours PID EXE: true while PID is alive, not a zombie, and still runs EXE (not a recycled PID).
# The daemons are re-parented to init and linger as zombies briefly, which kill -0 calls alive.
is_ours() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ "$state" != Z ] || return 1
  [ "$(basename "$(readlink "/proc/$1/exe" 2>/dev/null)")" = "$2" ]
}

# await SECONDS WHAT COMMAND...: poll COMMAND; give up early if a recorded daemon has died.
await() {
  local limit=$((SECONDS + $1)) what=$2 pid name exe
  shift 2
  until "$@" >/dev/null 2>&1; do
    while read -r pid name exe; do
      is_ours "$pid" "$exe" || fail "$name (pid $pid) exited while waiting for $what; see $STATE_DIR/log/$name.*"
    done <"$PID_FILE"
    [ "$SECONDS" -lt "$limit" ] || fail "gave up waiting for $what after $1 s; see $STATE_DIR/log"
    sleep 0.3
  done
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Stop the recorded daemons newest first (gateway, OSD, monitor): SIGTERM, SIGKILL after 10 s.
stop_recorded() {
  [ -f "$PID_FILE" ] || return 0
  local pid name exe
  while read -r pid name exe; do
    is_ours "$pid" "$exe" || continue
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
      is_ours "$pid" "$exe" || break
      sleep 0.1
    done
    if is_ours "$pid" "$exe"; then
      note "$name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done < <(tac "$PID_FILE")
  rm -f "$PID_FILE"
}

abort_start() {
  note "start failed: stopping what was started; logs stay in $STATE_DIR/log"
  tail -n 15 "$STATE_DIR"/log/*.log "$STATE_DIR"/log/*.stdout >&2 2>/dev/null || true
  stop_recorded
}

cmd_start() {
  ensure_packages
  [ -s "$PID_FILE" ] && fail "$PID_FILE exists: a server from this directory may be running; run '$0 stop' first"
  port_in_use "$S3_PORT" && fail "127.0.0.1:$S3_PORT is already in use; choose another CEPH_S3_PORT"
  port_in_use "$MON_PORT" && fail "127.0.0.1:$MON_PORT is already in use; choose another CEPH_S3_MON_PORT"
  rm -rf "$STATE_DIR"
  mkdir -p "$STATE_DIR"/{run,log,mon,osd,rgw,crash}
  : >"$PID_FILE"
  trap 'status=$?; [ "$status" -ne 0 ] && abort_start; exit "$status"' EXIT
  local began=$SECONDS fsid osd_uuid osd_id
  fsid=$(uuidgen)
  osd_uuid=$(uuidgen)
  write_config "$fsid"

  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$MON_PORT]" "$STATE_DIR/monmap" \
    >>"$STATE_DIR/log/mkfs.log" 2>&1
  ceph-mon -c "$CONF_FILE" --mkfs -i a --monmap "$STATE_DIR/monmap" >>"$STATE_DIR/log/mkfs.log" 2>&1
  launch mon.a ceph-mon -f -c "$CONF_FILE" -i a
  await 60 "the monitor" ceph_cli mon stat

  osd_id=$(ceph_cli osd new "$osd_uuid")
  # memstore's mkfs asserts in set_fsid unless its data directory already exists.
  mkdir -p "$STATE_DIR/osd/osd.$osd_id"
  ceph-osd -c "$CONF_FILE" -i "$osd_id" --mkfs --osd-uuid "$osd_uuid" >>"$STATE_DIR/log/mkfs.log" 2>&1
  launch "osd.$osd_id" ceph-osd -f -c "$CONF_FILE" -i "$osd_id"
  await 90 "osd.$osd_id to come up" \
    bash -c "ceph -c '$CONF_FILE' --connect-timeout 5 osd dump | grep -q '^osd.$osd_id up'"

  # radosgw-admin also creates the zone pools the gateway needs.
  timeout 120 radosgw-admin -c "$CONF_FILE" user create --uid=ckpt-test --display-name="ckpt test user" \
    --access-key="$KEY_ID" --secret-key="$KEY_SECRET" >"$STATE_DIR/log/user.json"
  note "S3 user created"

  launch rgw.a radosgw -f -c "$CONF_FILE" -n client.rgw.a
  await 90 "the S3 port $S3_PORT" curl -sf -o /dev/null "http://127.0.0.1:$S3_PORT/"
  note "S3 ready on 127.0.0.1:$S3_PORT after $((SECONDS - began)) s"
  trap - EXIT

  cat <<EXPORTS
export AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT
export AWS_ACCESS_KEY_ID=$KEY_ID
export AWS_SECRET_ACCESS_KEY=$KEY_SECRET
export AWS_REGION=us-east-1
export CKPT_TEST_S3_BUCKET=$TEST_BUCKET
EXPORTS
}

cmd_stop() {
  stop_recorded
  rm -rf "$STATE_DIR"
  note "stopped; $STATE_DIR removed"
}

cmd_status() {
  if [ ! -s "$PID_FILE" ]; then
    echo "not running ($PID_FILE absent)"
    return 1
  fi
  local pid name exe dead=0
  while read -r pid name exe; do
    if is_ours "$pid" "$exe"; then
      echo "$name pid $pid alive rss_kib=$(awk '/^VmRSS/{print $2}' "/proc/$pid/status")"
    else
      echo "$name pid $pid dead"
      dead=1
    fi
  done <"$PID_FILE"
  return "$dead"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
