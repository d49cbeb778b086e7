#!/usr/bin/env bash
# A cluster as an operator runs it, with the real binaries on loopback: a
# real etcd (Debian's etcd-server) and three kvtierd members (UCX over
# tcp/lo). Checks: the three join and agree on owners; a file put on node A
# reaches the owner of its chain and, evicted from A, is served to node B
# byte-exact through the shared tier; the owner killed with SIGKILL: a Get
# of a chain only it held is a quick miss while it is still in the ring, it
# leaves the ring within its lease, and the others keep serving byte-exact;
# etcd killed: the members keep serving, report etcd down and go
# local-only; etcd back: they rejoin it; the killed member restarted on its
# address rejoins with a new daemon id.
# Usage: cluster_cli_test.sh KVTIERD KVTIER  (exits 77, skipped, without etcd)
set -euo pipefail
KVTIERD=$1
KVTIER=$2
ETCD=${KVTIER_ETCD:-/usr/bin/etcd}
if [[ ! -x "$ETCD" ]]; then
  echo "SKIP: no etcd at $ETCD (scripts/install-deps installs etcd-server)"
  exit 77
fi
source "$(dirname "$0")/cli_test_lib.sh"
export UCX_NET_DEVICES=lo UCX_TLS=tcp

{ read -r EPORT; read -r PPORT; read -r PORT_A; read -r PORT_B; read -r PORT_C; } < <(free_ports 5)
ETCD_PID=
start_etcd() {
  "$ETCD" --name t --data-dir "$WORK/etcd" --log-level error \
    --listen-client-urls "http://127.0.0.1:$EPORT" --advertise-client-urls "http://127.0.0.1:$EPORT" \
    --listen-peer-urls "http://127.0.0.1:$PPORT" --initial-advertise-peer-urls "http://127.0.0.1:$PPORT" \
    --initial-cluster "t=http://127.0.0.1:$PPORT" >>"$WORK/etcd.log" 2>&1 &
  ETCD_PID=$!
  PIDS+=("$ETCD_PID")
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$EPORT/health" >/dev/null && return 0
    sleep 0.1
  done
  cat "$WORK/etcd.log" >&2
  fail "etcd did not start"
}

# start_member NAME PORT [ARGS...]: sets ADDR_<NAME>, PID_<NAME>.
start_member() {
  local name=$1 port=$2
  shift 2
  start_kvtierd "$WORK/$name" --listen "127.0.0.1:$port" --host-tier-bytes 128MiB --set nvme.dirs= \
    --set costmodel.probe_tiers=false --set gpu.tier=off --set metrics.listen=off \
    --set peer.transport=ucx --set "cluster.etcd=127.0.0.1:$EPORT" --set cluster.name=test \
    --set cluster.lease_ttl_ms=2000 --set cluster.etcd_timeout_ms=500 "$@"
  printf -v "ADDR_$name" '%s' "$ADDR"
  printf -v "PID_$name" '%s' "$DAEMON_PID"
}

# field ADDR PYTHON-EXPR: evaluates EXPR over the member's GetCluster JSON (`c`).
field() {
  "$KVTIER" --addr "$1" --json cluster |
    python3 -c "import json,sys; c=json.load(sys.stdin); print($2)"
}
# wait_for ADDR PYTHON-EXPR SECONDS: until EXPR is True; prints the seconds waited.
wait_for() {
  local start=$SECONDS deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    [[ $(field "$1" "$2" 2>/dev/null || true) == True ]] && { echo $((SECONDS - start)); return 0; }
    sleep 0.2
  done
  "$KVTIER" --addr "$1" cluster >&2 || true
  fail "$1: '$2' did not hold within $3 s"
}

step "etcd and three members join"
start_etcd
start_member a "$PORT_A"
start_member b "$PORT_B"
start_member c "$PORT_C"
for m in "$ADDR_a" "$ADDR_b" "$ADDR_c"; do
  wait_for "$m" "len(c['members'])==3 and c['etcd_up']" 15 >/dev/null
done
"$KVTIER" --addr "$ADDR_a" cluster | tee "$WORK/cluster.txt"
grep -q "^3 members" "$WORK/cluster.txt" || fail "cluster view"
grep -q "shared tier: pulled 0 blocks" "$WORK/cluster.txt" || fail "no shared tier line"

step "a file put on a member that does not own its chain"
# The namespace `kvtier put` uses, opened on every member (an engine of the
# same model would open it on each node).
for m in "$ADDR_a" "$ADDR_b" "$ADDR_c"; do
  "$KVTIER" --addr "$m" get 00 -o "$WORK/none" --block-bytes 1MiB 2>/dev/null || true
done
NS=$("$KVTIER" --addr "$ADDR_a" --json namespaces | python3 -c "import json,sys; print(json.load(sys.stdin)['namespaces'][0]['namespace_id'])")
for attempt in $(seq 1 20); do
  head -c $((3 * 1048576 + 4321)) /dev/urandom >"$WORK/prompt.kv"
  # kvtier put prints the keys, root first; the owner of the root owns the
  # chain. A chain a owns would not be offered: try another file.
  mapfile -t KEYS < <("$KVTIER" --addr "$ADDR_a" put "$WORK/prompt.kv" --block-bytes 1MiB)
  OWNER=$("$KVTIER" --addr "$ADDR_a" --json cluster --namespace "$NS" --owner "${KEYS[0]}" |
    python3 -c "import json,sys; print(json.load(sys.stdin)['owners'][0])")
  [[ "$OWNER" != "$ADDR_a" ]] && break
done
[[ "$OWNER" != "$ADDR_a" ]] || fail "every chain tried was owned by a"
[[ ${#KEYS[@]} -eq 4 ]] || fail "expected 4 keys, got ${#KEYS[@]}"
for m in "$ADDR_b" "$ADDR_c"; do
  got=$("$KVTIER" --addr "$m" --json cluster --namespace "$NS" --owner "${KEYS[@]}" |
    python3 -c "import json,sys; print(' '.join(json.load(sys.stdin)['owners']))")
  want=$("$KVTIER" --addr "$ADDR_a" --json cluster --namespace "$NS" --owner "${KEYS[@]}" |
    python3 -c "import json,sys; print(' '.join(json.load(sys.stdin)['owners']))")
  [[ "$got" == "$want" ]] || fail "members disagree on owners: $m says '$got', a says '$want'"
done
if [[ "$OWNER" == "$ADDR_b" ]]; then READER=$ADDR_c; else READER=$ADDR_b; fi
echo "owner $OWNER, reader $READER"

step "the owner receives the chain (offered in the background)"
for _ in $(seq 1 50); do
  "$KVTIER" --addr "$OWNER" get "${KEYS[@]}" -o "$WORK/owner.kv" --block-bytes 1MiB 2>/dev/null && break
  sleep 0.2
done
cmp "$WORK/prompt.kv" "$WORK/owner.kv" || fail "the owner does not serve the chain byte-exact"
[[ $(field "$ADDR_a" "int(c['tier']['offered_blocks'])") -ge 4 ]] || fail "a counted no offer"

step "a evicts the chain; its owner still holds it"
"$KVTIER" --addr "$ADDR_a" evict --namespace "$NS" >/dev/null
left=$("$KVTIER" --addr "$ADDR_a" --json blocks --namespace "$NS" |
  python3 -c "import json,sys; print(int(json.load(sys.stdin).get('total_blocks', 0)))")
[[ "$left" == 0 ]] || fail "a still holds $left blocks after evicting"

step "a third member serves it byte-exact through the shared tier"
"$KVTIER" --addr "$READER" get "${KEYS[@]}" -o "$WORK/reader.kv" --block-bytes 1MiB
cmp "$WORK/prompt.kv" "$WORK/reader.kv" || fail "the reader served different bytes"
[[ $(field "$READER" "int(c['tier']['pulled_blocks'])") == 4 ]] || fail "the reader did not pull 4 blocks"

step "a second chain of the same owner, offered to it but not on the reader"
for attempt in $(seq 1 40); do
  head -c 1048576 /dev/urandom >"$WORK/second.kv"
  mapfile -t SECOND < <("$KVTIER" --addr "$ADDR_a" put "$WORK/second.kv" --block-bytes 1MiB)
  owner2=$("$KVTIER" --addr "$ADDR_a" --json cluster --namespace "$NS" --owner "${SECOND[0]}" |
    python3 -c "import json,sys; print(json.load(sys.stdin)['owners'][0])")
  [[ "$owner2" == "$OWNER" ]] && break
done
[[ "$owner2" == "$OWNER" ]] || fail "no second chain owned by $OWNER"
for _ in $(seq 1 50); do
  "$KVTIER" --addr "$OWNER" get "${SECOND[@]}" -o "$WORK/second.owner" --block-bytes 1MiB 2>/dev/null && break
  sleep 0.2
done
cmp "$WORK/second.kv" "$WORK/second.owner" || fail "the owner lacks the second chain"

step "the owner is killed (SIGKILL): misses stay quick, it leaves the ring within its lease"
if [[ "$OWNER" == "$ADDR_b" ]]; then OWNER_PID=$PID_b OWNER_PORT=$PORT_B; else OWNER_PID=$PID_c OWNER_PORT=$PORT_C; fi
kill -9 "$OWNER_PID"
# Still in the ring: the reader asks the dead owner, fails fast, answers a miss.
start=$SECONDS
rc=0
"$KVTIER" --addr "$READER" get "${SECOND[@]}" -o "$WORK/second.reader" --block-bytes 1MiB \
  2>"$WORK/second.err" || rc=$?
((SECONDS - start <= 4)) || fail "a Get asking the dead owner took $((SECONDS - start)) s"
[[ $rc -eq 1 ]] && grep -q NOT_FOUND "$WORK/second.err" ||
  fail "a Get of a chain only the dead owner held: exit $rc, $(cat "$WORK/second.err")"
[[ $(field "$READER" "int(c['tier']['pull_failures'])") -ge 1 ]] || fail "no pull failure counted"
took=$(wait_for "$ADDR_a" "len(c['members'])==2" 10)
echo "left the ring after ${took} s (lease 2 s)"
[[ $took -le 5 ]] || fail "the dead member stayed ${took} s"
"$KVTIER" --addr "$READER" get "${KEYS[@]}" -o "$WORK/after.kv" --block-bytes 1MiB
cmp "$WORK/prompt.kv" "$WORK/after.kv" || fail "wrong bytes after the owner died"
head -c 1048576 /dev/urandom >"$WORK/new.kv"
mapfile -t NEW < <("$KVTIER" --addr "$ADDR_a" put "$WORK/new.kv" --block-bytes 1MiB)
start=$SECONDS
"$KVTIER" --addr "$READER" get "${NEW[@]}" -o "$WORK/new.out" --block-bytes 1MiB 2>/dev/null || true
((SECONDS - start <= 4)) || fail "a Get on the survivors took $((SECONDS - start)) s"

step "etcd killed: members keep serving, say etcd is down, go local-only"
kill -9 "$ETCD_PID"
wait "$ETCD_PID" 2>/dev/null || true
wait_for "$ADDR_a" "not c['etcd_up'] and c['local_only']" 10 >/dev/null
"$KVTIER" --addr "$ADDR_a" cluster | tee "$WORK/down.txt"
grep -q "UNREACHABLE" "$WORK/down.txt" || fail "no UNREACHABLE"
grep -q "LOCAL-ONLY" "$WORK/down.txt" || fail "no LOCAL-ONLY"
"$KVTIER" --addr "$READER" get "${KEYS[@]}" -o "$WORK/local.kv" --block-bytes 1MiB
cmp "$WORK/prompt.kv" "$WORK/local.kv" || fail "wrong bytes with etcd down"

step "etcd back: the members rejoin it"
start_etcd
wait_for "$ADDR_a" "c['etcd_up'] and not c['local_only'] and len(c['members'])==2" 15 >/dev/null

step "the killed member restarts on its address with a new daemon id and rejoins"
if [[ "$OWNER" == "$ADDR_b" ]]; then start_member b2 "$OWNER_PORT"; else start_member c2 "$OWNER_PORT"; fi
wait_for "$ADDR_a" "len(c['members'])==3" 15 >/dev/null
NEW_DAEMON=$(field "$ADDR_a" "[m['daemon_id'] for m in c['members'] if m['node_id']=='$OWNER'][0]")
OLD_DAEMON=$(python3 -c "
import re,sys
for block in open('$WORK/cluster.txt').read().split('\n  '):
    if block.startswith('$OWNER '):
        print(re.search(r'daemon ([0-9a-f]+)', block).group(1))")
[[ -n "$OLD_DAEMON" ]] || fail "no daemon id of $OWNER in the first cluster view"
[[ -n "$NEW_DAEMON" && "$NEW_DAEMON" != "$OLD_DAEMON" ]] ||
  fail "the rejoined member kept its daemon id ($NEW_DAEMON)"
"$KVTIER" --addr "$ADDR_a" cluster
echo "PASS"
