#!/usr/bin/env bash
# Prefill-to-decode transfer as an operator drives it, with the real
# binaries on loopback (UCX over tcp/lo): two kvtierd (roles prefill and
# decode); `kvtier put` a file on the prefill daemon, `kvtier transfer --push`
# it to the decode daemon, `kvtier get` it back from the decode daemon
# byte-exact; a pull of the same keys moves nothing new; `kvtier peers` lists
# the link with its transports and bytes; `kvtier plan pd --peers` judges the
# measured link beside the catalog links; a decode daemon refuses to push.
# Usage: peer_cli_test.sh KVTIERD KVTIER
set -euo pipefail
KVTIERD=$1
KVTIER=$2
source "$(dirname "$0")/cli_test_lib.sh"
export UCX_NET_DEVICES=lo UCX_TLS=tcp

# start_daemon NAME ROLE: sets ADDR_<NAME>.
start_daemon() {
  local name=$1 role=$2
  start_kvtierd "$WORK/$name" --listen 127.0.0.1:0 --host-tier-bytes 128MiB --set nvme.dirs= \
    --set costmodel.probe_tiers=false --set gpu.tier=off --set "peer.role=$role" \
    --set peer.transport=ucx --set metrics.listen=off
  printf -v "ADDR_$name" '%s' "$ADDR"
}

start_daemon prefill prefill
start_daemon decode decode
P=$ADDR_prefill
D=$ADDR_decode

step "status names the transport and the role"
"$KVTIER" --addr "$P" status | grep -q "transfer:   ucx (transports tcp), role prefill" ||
  fail "status does not show the transfer line"

step "put on prefill, push to decode, get from decode byte-exact"
head -c $((3 * 1048576 + 12345)) /dev/urandom >"$WORK/prompt.kv"
mapfile -t KEYS < <("$KVTIER" --addr "$P" put "$WORK/prompt.kv" --block-bytes 1MiB)
[[ ${#KEYS[@]} -eq 4 ]] || fail "expected 4 keys, got ${#KEYS[@]}"
"$KVTIER" --addr "$D" get "${KEYS[@]}" -o "$WORK/none" --block-bytes 1MiB 2>/dev/null &&
  fail "the decode daemon had the blocks before the transfer"
"$KVTIER" --addr "$P" transfer --peer "$D" --push --block-bytes 1MiB "${KEYS[@]}" >"$WORK/push.txt" ||
  { cat "$WORK/push.txt"; fail "push failed"; }
[[ $(grep -c '  ok' "$WORK/push.txt") -eq 4 ]] || fail "not every block reported ok"
grep -q "moved over tcp/lo" "$WORK/push.txt" || fail "push did not report tcp/lo"
"$KVTIER" --addr "$D" get "${KEYS[@]}" -o "$WORK/back.kv" --block-bytes 1MiB
cmp "$WORK/prompt.kv" "$WORK/back.kv" || fail "decode side served different bytes"

step "pull of blocks the decode daemon has moves nothing"
"$KVTIER" --addr "$D" transfer --peer "$P" --pull --block-bytes 1MiB "${KEYS[@]}" >"$WORK/pull.txt"
grep -q "^0 B moved" "$WORK/pull.txt" || { cat "$WORK/pull.txt"; fail "pull moved bytes again"; }

step "a decode daemon does not push (exit 1, FAILED_PRECONDITION)"
rc=0
"$KVTIER" --addr "$D" transfer --peer "$P" --push --block-bytes 1MiB "${KEYS[0]}" \
  >/dev/null 2>"$WORK/refused.err" || rc=$?
[[ $rc -eq 1 ]] || fail "decode push exited $rc"
grep -q "FAILED_PRECONDITION" "$WORK/refused.err" || fail "no FAILED_PRECONDITION: $(cat "$WORK/refused.err")"

step "peers lists the link with transports and bytes"
"$KVTIER" --addr "$P" peers >"$WORK/peers.txt"
grep -q "^$D  decode  connected via tcp/lo" "$WORK/peers.txt" || { cat "$WORK/peers.txt"; fail "peers line"; }
grep -q "sent 3.0 MiB (4 blocks)" "$WORK/peers.txt" || { cat "$WORK/peers.txt"; fail "peers bytes"; }
"$KVTIER" --addr "$P" --json peers | grep -q '"observed_bytes_per_second"' || fail "peers --json"

step "plan pd --peers judges the measured link"
"$KVTIER" --addr "$P" plan pd --model llama-3.1-8b --gpu h100-sxm --tokens 4096 --peers \
  >"$WORK/pd.txt"
grep -q "peer $D (measured, tcp/lo)" "$WORK/pd.txt" || { cat "$WORK/pd.txt"; fail "no measured link"; }
cat "$WORK/pd.txt"
echo "PASS"
