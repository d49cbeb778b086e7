#!/usr/bin/env bash
# Prefill-to-decode transfer between two daemons (build/bench/peer_transfer)
# against its baseline, ucx_perftest ucp_put_bw between two processes, with
# the same UCX transports and message size, in the same run, on loopback.
# Prints both bandwidths and their ratio for UCX_TLS=tcp and shared memory.
#
#   bench/peer_transfer_vs_ucx_perftest.sh [BUILD_DIR] [BLOCK_BYTES] [BLOCKS]
set -euo pipefail
build=${1:-build}
block=${2:-1048576}
blocks=${3:-128}
bench="$build/bench/peer_transfer"
if [[ ! -x "$bench" ]]; then
  echo "SKIP: $bench not built (a build without UCX)"; exit 0
fi
if ! command -v ucx_perftest >/dev/null; then
  echo "SKIP: ucx_perftest not installed (apt-get install ucx-utils)"; exit 0
fi
export UCX_NET_DEVICES=lo
iters=$(( blocks * 6 ))

# Overall bandwidth (MB/s) of one ucx_perftest ucp_put_bw run, best of 3.
perftest() {
  local best=0 port out bw
  for _ in 1 2 3; do
    port=$(( 20000 + RANDOM % 20000 ))
    ucx_perftest -t ucp_put_bw -s "$block" -n "$iters" -p "$port" >/dev/null 2>&1 &
    local server=$!
    sleep 0.5
    out=$(ucx_perftest 127.0.0.1 -t ucp_put_bw -s "$block" -n "$iters" -p "$port" 2>&1 || true)
    wait "$server" || true
    bw=$(awk '/^Final:/ {print $7}' <<<"$out")
    if [[ -n "$bw" ]] && awk -v a="$bw" -v b="$best" 'BEGIN {exit !(a > b)}'; then best=$bw; fi
  done
  echo "$best"
}

printf '%-8s %-22s %14s %14s %14s %8s %8s\n' transport lanes perftest_MBps \
  e2e_MBps transport_MBps e2e/pt tr/pt
for case in tcp shm; do
  if [[ $case == tcp ]]; then
    export UCX_TLS=tcp; flags=()
  else
    # The daemons' endpoints use peer failure detection, so UCX 1.13 moves
    # their bytes over tcp even where shared memory is allowed (the lanes
    # column shows it); ucx_perftest (no failure detection) uses posix/sysv.
    export UCX_TLS=shm,tcp; flags=()
  fi
  pt=$(perftest)
  line=$("$bench" --block-bytes "$block" --blocks "$blocks" --rounds 5 "${flags[@]}")
  lanes=$(sed -n 's/.*lanes=\([^ ]*\).*/\1/p' <<<"$line")
  e2e=$(sed -n 's/.*e2e_MBps=\([0-9.]*\).*/\1/p' <<<"$line")
  tr=$(sed -n 's/.*transport_MBps=\([0-9.]*\).*/\1/p' <<<"$line")
  awk -v c="$case" -v l="$lanes" -v p="$pt" -v e="$e2e" -v t="$tr" 'BEGIN {
    printf "%-8s %-22s %14.1f %14.1f %14.1f %8.2f %8.2f\n", c, l, p, e, t,
           (p > 0 ? e / p : 0), (p > 0 ? t / p : 0) }'
done
echo "block ${block} bytes x ${blocks} blocks per transfer; best of 5 transfers and of 3 perftest runs"
