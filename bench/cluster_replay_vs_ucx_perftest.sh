#!/usr/bin/env bash
# The cluster's shared tier on the Mooncake trace (build/bench/cluster_replay:
# three nodes round-robin, each alone vs the cluster) and, in the same run,
# the baseline for its pull bandwidth: ucx_perftest ucp_put_bw between two
# processes with the same transports (UCX_TLS=tcp on lo) and the same
# message size as one block (16 KiB). Prints the replay's table and the
# ratio of the pulls' transport bandwidth to the baseline.
#
#   bench/cluster_replay_vs_ucx_perftest.sh [BUILD_DIR] [REQUESTS]
set -euo pipefail
build=${1:-build}
requests=${2:-0}
bench="$build/bench/cluster_replay"
if [[ ! -x "$bench" ]]; then
  echo "SKIP: $bench not built (a build without UCX)"; exit 0
fi
if ! command -v ucx_perftest >/dev/null; then
  echo "SKIP: ucx_perftest not installed (apt-get install ucx-utils)"; exit 0
fi
export UCX_NET_DEVICES=lo UCX_TLS=tcp
block=16384

# Overall bandwidth (MB/s) of ucx_perftest ucp_put_bw, best of 3.
perftest() {
  local best=0 port out bw
  for _ in 1 2 3; do
    port=$(( 20000 + RANDOM % 20000 ))
    ucx_perftest -t ucp_put_bw -s "$block" -n 20000 -p "$port" >/dev/null 2>&1 &
    local server=$!
    sleep 0.5
    out=$(ucx_perftest 127.0.0.1 -t ucp_put_bw -s "$block" -n 20000 -p "$port" 2>&1 || true)
    wait "$server" || true
    bw=$(awk '/^Final:/ {print $7}' <<<"$out")
    if [[ -n "$bw" ]] && awk -v a="$bw" -v b="$best" 'BEGIN {exit !(a > b)}'; then best=$bw; fi
  done
  echo "$best"
}

pt=$(perftest)
out=$("$bench" --requests "$requests" 2>/dev/null)
echo "$out"
pull=$(sed -n 's/.*pull_transport_MBps=\([0-9.]*\).*/\1/p' <<<"$out")
awk -v p="$pt" -v c="$pull" 'BEGIN {
  printf "ucx_perftest ucp_put_bw %d-byte messages: %.1f MB/s; pulls %.1f MB/s = %.2f of it\n",
         16384, p, c, (p > 0 ? c / p : 0) }'
