#!/usr/bin/env bash
# The gRPC byte path (Put/Get) against Redis doing SET/GET of the same value
# sizes at the same concurrency, in the same run: starts redis-server on a
# loopback port (Debian's redis-server; installed if missing), runs
# redis-benchmark, then build/bench/put_get_rpc, and prints ops/s and the
# ratio kvtier/redis per operation and size. Redis SET/GET use one key (no
# -r), so every GET returns a value of the full size and every SET reuses
# memory Redis already holds; kvtier's PUT row is likewise its Put into
# resident arena slots, and PUT1 its first fill (see bench/put_get_rpc.cc).
#   bench/put_get_vs_redis.sh [BUILD_DIR] [CLIENTS] [OPS]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
CLIENTS=${2:-8}
OPS=${3:-2000}
SIZES=(4096 65536 262144)
bash "$ROOT/scripts/install-deps" redis-server redis-tools >/dev/null
WORK=$(mktemp -d)
PORT=$((20000 + RANDOM % 20000))
redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
  --daemonize no >"$WORK/redis.log" 2>&1 &
REDIS=$!
trap 'kill $REDIS 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
: >"$WORK/results.csv"
for size in "${SIZES[@]}"; do
  redis-benchmark -h 127.0.0.1 -p "$PORT" -t set,get -d "$size" -c "$CLIENTS" -n "$OPS" \
    --csv 2>/dev/null | tail -n +2 | tr -d '"' |
    awk -F, -v s="$size" '{print "redis," $1 "," s "," $2}' >>"$WORK/results.csv"
done
"$BUILD/bench/put_get_rpc" --clients "$CLIENTS" --ops "$OPS" --csv \
  --sizes "$(IFS=,; echo "${SIZES[*]}")" >>"$WORK/results.csv"
python3 - "$WORK/results.csv" "$CLIENTS" <<'PY'
import csv, sys
rows = {}
for who, op, size, rate in csv.reader(open(sys.argv[1])):
    op = {"SET": "PUT", "GET": "GET", "PUT": "PUT", "PUT_FIRST_FILL": "PUT1", "NOOP": "NOOP"}[op.upper()]
    rows[(who, op, int(size))] = float(rate)
floor = rows.get(("kvtier", "NOOP", 0))
print(f"put_get_vs_redis: {sys.argv[2]} clients, loopback TCP, ops/s")
print(f"empty KvCache RPC, same clients (gRPC's floor here): {floor:.0f} calls/s")
print("PUT1: kvtier's Put into arena memory no block used before (page faults); PUT: the same")
print("Puts again after a Delete, into resident slots, as Redis's SET of one key reuses memory")
print(f"{'size':>8} {'op':>4} {'redis':>10} {'kvtier':>10} {'ratio':>7} {'/empty RPC':>11}")
for (who, op, size) in sorted(k for k in rows if k[0] == "kvtier" and k[1] != "NOOP"):
    r = rows.get(("redis", "PUT" if op == "PUT1" else op, size))
    k = rows[(who, op, size)]
    if op == "PUT1":  # no Redis row measures a first fill: no ratio to it
        print(f"{size:>8} {op:>4} {'-':>10} {k:>10.0f} {'-':>7} {k / floor:>11.2f}")
    else:
        print(f"{size:>8} {op:>4} {r:>10.0f} {k:>10.0f} {k / r:>7.2f} {k / floor:>11.2f}" if r else f"{size} {op} no redis figure")
PY
