#!/usr/bin/env bash
# Hostile item 6: descriptor exhaustion must not wedge the gRPC listener.
# kvtierd is started with a soft RLIMIT_NOFILE of 256 (a common default) and
# 400 idle TCP connections are opened to its gRPC port: a real RPC must still
# succeed within seconds while they are open, and again once they are closed
# (gRPC 1.51's accept loop, once it has hit EMFILE, otherwise accepts nothing
# for about a minute). The daemon raises its soft limit to the hard one and
# closes connections that do not complete their handshake within 10 s.
# Usage: fd_exhaustion_test.sh KVTIERD KVTIER
set -euo pipefail
KVTIERD_BINARY=$1 KVTIER=$2
HERE=$(dirname "$0")
# shellcheck source=../integration/cli_test_lib.sh
source "$HERE/../integration/cli_test_lib.sh"

hard=$(ulimit -Hn)
if [[ "$hard" != unlimited && "$hard" -lt 1024 ]]; then
  echo "SKIP: the hard RLIMIT_NOFILE is $hard (< 1024): no room for 400 connections"
  exit 77
fi

# The daemon runs with a soft limit of 256 (the test itself keeps its own).
cat >"$WORK/kvtierd-256" <<SH
#!/bin/sh
ulimit -Sn 256
exec "$KVTIERD_BINARY" "\$@"
SH
chmod +x "$WORK/kvtierd-256"
KVTIERD="$WORK/kvtierd-256"

step "kvtierd with a soft limit of 256 open files"
start_kvtierd "$WORK/d" --listen 127.0.0.1:0 --host-tier-bytes 64MiB --set host_tier.slab_bytes=1MiB \
  --set limits.max_block_bytes=1MiB --set metrics.listen=off --set nvme.dirs= \
  --set costmodel.probe_tiers=false --set peer.transport=off
soft=$(awk '/^Max open files/ {print $4}' "/proc/$DAEMON_PID/limits")
echo "  daemon soft limit now $soft (hard $hard)"
[[ "$soft" == "$(awk '/^Max open files/ {print $5}' "/proc/$DAEMON_PID/limits")" ]] ||
  fail "the soft limit ($soft) was not raised to the hard one"
grep -q "open files" "$WORK/d.err" || fail "the open-file limit is not logged"

# status_within SECONDS WHAT: a real RPC answers within SECONDS.
status_within() {
  local start end
  start=$(date +%s.%N)
  timeout $(($1 + 2)) "$KVTIER" --addr "$ADDR" --timeout "$1" status >"$WORK/status.out" 2>&1 ||
    fail "$2: kvtier status did not answer within $1 s: $(tail -3 "$WORK/status.out")"
  end=$(date +%s.%N)
  grep -q "host" "$WORK/status.out" || fail "$2: unexpected status output: $(cat "$WORK/status.out")"
  echo "  $2: answered in $(python3 -c "print(round($end - $start, 2))") s"
}
status_within 3 "before"

step "400 idle TCP connections to the gRPC port"
# hold N [ARGS]: hold_connections.py in the background, stdin on fd 3.
mkfifo "$WORK/hold.in"
python3 "$HERE/hold_connections.py" "$ADDR" 400 <"$WORK/hold.in" >"$WORK/hold.out" &
PIDS+=("$!")
exec 3>"$WORK/hold.in"
wait_line() {  # wait_line PATTERN: until hold.out has it (30 s)
  for _ in $(seq 1 300); do
    grep -q "$1" "$WORK/hold.out" && return 0
    sleep 0.1
  done
  fail "hold_connections.py: no '$1' (got '$(cat "$WORK/hold.out")')"
}
wait_line "^open"
grep -q "^open 400$" "$WORK/hold.out" || fail "expected 400 connections: $(cat "$WORK/hold.out")"
echo "  $(head -1 "$WORK/hold.out") connections held"
sleep 1  # the daemon's accept loop has reached them all
status_within 3 "while they are open"

step "the daemon closes them: no handshake within 10 s"
fds() { find "/proc/$DAEMON_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
echo "  daemon descriptors: $(fds)"
[[ $(fds) -ge 400 ]] || fail "the daemon does not hold the 400 connections ($(fds) descriptors)"
for _ in $(seq 1 150); do
  [[ $(fds) -lt 100 ]] && break
  sleep 0.1
done
[[ $(fds) -lt 100 ]] || fail "the idle connections were not closed: $(fds) descriptors after 15 s"
echo "  daemon descriptors: $(fds)"

step "after they close"
exec 3>&-
wait_line "^closed"
sleep 0.5
status_within 3 "after they closed"
kill -0 "$DAEMON_PID" || fail "kvtierd died"
echo "PASS"
