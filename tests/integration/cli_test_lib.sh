# Shared by the end-to-end CLI test scripts (sourced, not run): a work
# directory and the daemons started in it are removed on exit, whatever
# happens; `fail` and `step` report.
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }
