# Shared by the end-to-end CLI test scripts (sourced, not run): a work
# directory and the daemons started in it are removed on exit, whatever
# happens; `fail` and `step` report. A failed run first prints the end of
# each daemon's log, so that a daemon that died says why.
WORK=$(mktemp -d)
PIDS=()
LOGS=()
cleanup() {
  local rc=$?
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && kill -9 "$p" 2>/dev/null || true; done
  if [[ $rc -ne 0 ]]; then
    for l in "${LOGS[@]:-}"; do
      [[ -s "$l.err" ]] || continue
      echo "--- the last lines of $(basename "$l").err:" >&2
      tail -n 60 "$l.err" >&2
    done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }

# free_ports N: prints N distinct free loopback ports, one per line (picked
# together: ports asked for one at a time can repeat).
free_ports() { python3 "$(dirname "${BASH_SOURCE[0]}")/../daemon_socket.py" "$1"; }

# start_kvtierd LOG ARGS...: starts "$KVTIERD" ARGS in the background (stdout
# to LOG.out, stderr to LOG.err) and waits until it logs its address; sets
# DAEMON_PID and ADDR.
start_kvtierd() {
  local log=$1; shift
  # The parent creates the logs: the background child opens its redirections
  # only once it runs, which can be after the first read below.
  : >"$log.out"
  : >"$log.err"
  "$KVTIERD" "$@" >"$log.out" 2>"$log.err" &
  DAEMON_PID=$!
  PIDS+=("$DAEMON_PID")
  LOGS+=("$log")
  for _ in $(seq 1 100); do
    ADDR=$(sed -n 's/.*kvtierd listening on \(.*\)$/\1/p' "$log.err" | head -1)
    [[ -n "$ADDR" ]] && return 0
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$log.err" >&2; fail "kvtierd exited at start"; }
    sleep 0.1
  done
  fail "kvtierd did not report its address: $(cat "$log.err")"
}
