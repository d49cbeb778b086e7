#!/usr/bin/env bash
# Every benchmark refuses what it does not know, before it measures anything:
# an unknown flag and a stray positional argument (trace_replay once replayed
# its default trace when given a path without --trace) each end the run with
# a non-zero status and a message naming the argument. --help exits 0.
# Usage: bench_args_test.sh BENCH...
set -uo pipefail
[[ $# -gt 0 ]] || { echo "FAIL: no benchmarks given" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failed=0
# refuses BENCH WORD ARGS...: BENCH ARGS exits non-zero within 10 s and its
# stderr names WORD.
refuses() {
  local bench=$1 word=$2; shift 2
  local rc=0
  timeout 10 "$bench" "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  if [[ $rc -eq 0 || $rc -eq 124 ]]; then
    echo "FAIL: $(basename "$bench") $* exited $rc (124: it ran instead of refusing)" >&2
    failed=1
  elif ! grep -q -- "$word" "$WORK/err"; then
    echo "FAIL: $(basename "$bench") $*: stderr does not name '$word': $(head -c 300 "$WORK/err")" >&2
    failed=1
  fi
}
for bench in "$@"; do
  refuses "$bench" --no-such-flag --no-such-flag 1
  refuses "$bench" stray-argument stray-argument
  refuses "$bench" --help-me --help-me
  rc=0; timeout 10 "$bench" --help >"$WORK/help" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]] || ! grep -q -- "--help" "$WORK/help"; then
    echo "FAIL: $(basename "$bench") --help exited $rc: $(head -c 300 "$WORK/help")" >&2
    failed=1
  fi
done
[[ $failed -eq 0 ]] || exit 1
echo "PASS: $# benchmarks refuse unknown arguments"
