#!/usr/bin/env bash
# Hostile item 10: a clean stop under write-through load keeps every
# acknowledged block. Six writers put files (each a chain of 256 KiB blocks)
# into a write-through daemon whose mover runs only every 30 s, and SIGTERM
# comes while they write, so at the signal nearly every acknowledged block is
# still owed to NVMe and Puts are in flight. The daemon must let them finish,
# write the backlog within its shutdown grace, exit 0, and after a restart
# serve every block whose Put was acknowledged (before or after the signal),
# byte-exact.
# Usage: clean_stop_test.sh KVTIERD KVTIER
set -euo pipefail
KVTIERD=$1 KVTIER=$2
HERE=$(dirname "$0")
# shellcheck source=../integration/cli_test_lib.sh
source "$HERE/../integration/cli_test_lib.sh"

CONFIG=(--host-tier-bytes 512MiB --set metrics.listen=off --set "nvme.dirs=$WORK/nvme"
        --set nvme.bytes_per_dir=512MiB --set nvme.slab_bytes=4MiB
        --set limits.max_block_bytes=1MiB --set nvme.write_policy=write_through
        --set nvme.mover_interval_ms=30000 --set nvme.io_engine=pread
        --set server.shutdown_grace_ms=10000 --listen 127.0.0.1:0)

step "start a write-through daemon"
start_kvtierd "$WORK/first" "${CONFIG[@]}"

step "six writers putting 2 MiB files; SIGTERM while they write"
writer() {
  local w=$1
  for i in $(seq 1 30); do
    local f="$WORK/w$w-$i"
    head -c $((2 << 20)) /dev/urandom >"$f"
    if "$KVTIER" --addr "$ADDR" --timeout 20 put "$f" --block-bytes 256KiB >"$f.keys" 2>"$f.err"
    then
      echo "$f" >>"$WORK/acked-$w"  # acknowledged: its keys are in $f.keys
    else
      return 0  # the daemon stopped taking calls
    fi
  done
}
writers=()
for w in 1 2 3 4 5 6; do
  writer "$w" &
  writers+=($!)
  PIDS+=($!)  # killed with the daemons if the test fails early
done
# Under load: once a dozen puts are acknowledged, with the writers going on.
for _ in $(seq 1 200); do
  n=$({ cat "$WORK"/acked-* 2>/dev/null || true; } | wc -l)
  [[ "$n" -ge 12 ]] && break
  sleep 0.05
done
[[ "$n" -ge 12 ]] || fail "the writers got only $n puts through"
demoted=$("$KVTIER" --addr "$ADDR" --json status | python3 -c \
  'import json,sys; print(json.load(sys.stdin)["counters"].get("demotions", 0))')
kill -TERM "$DAEMON_PID"
rc=0
wait "$DAEMON_PID" || rc=$?
wait "${writers[@]}"
[[ $rc -eq 0 ]] || fail "kvtierd exited $rc on SIGTERM: $(tail -5 "$WORK/first.err")"
cat "$WORK"/acked-* >"$WORK/acked"
acked=$(wc -l <"$WORK/acked")
echo "acknowledged $acked files ($((acked * 8)) blocks); $demoted blocks were on NVMe at the signal"
[[ "$demoted" -lt $((acked * 8)) ]] || fail "nothing was owed to NVMe at the signal: the test tests nothing"
grep "shutdown: wrote" "$WORK/first.err" || fail "no NVMe drain at shutdown: $(tail -5 "$WORK/first.err")"
if grep -q "still unwritten" "$WORK/first.err"; then fail "the grace period ended first"; fi

step "restart on the same NVMe directory: every acknowledged block is served"
start_kvtierd "$WORK/second" "${CONFIG[@]}"
while read -r f; do
  # shellcheck disable=SC2046
  "$KVTIER" --addr "$ADDR" get $(cat "$f.keys") -o "$f.back" --block-bytes 256KiB \
    2>"$f.get.err" || fail "$(basename "$f"): acknowledged blocks lost: $(cat "$f.get.err")"
  cmp -s "$f" "$f.back" || fail "$(basename "$f"): bytes differ after restart"
done <"$WORK/acked"
echo "PASS: $acked acknowledged files survived a clean stop byte-exact"
