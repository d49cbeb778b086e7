#!/usr/bin/env bash
# A real Prometheus (Debian's `prometheus`) scrapes a real kvtierd on
# loopback; the series are checked through Prometheus's HTTP API: storage
# counters after a put/get, per-RPC counters and latency histograms with
# their tenant label, tier occupancy, planner decisions and wear.
# Usage: prometheus_scrape_test.sh KVTIERD KVTIER
set -euo pipefail
KVTIERD=$1 KVTIER=$2
# shellcheck source=cli_test_lib.sh
source "$(dirname "$0")/cli_test_lib.sh"
command -v prometheus >/dev/null || fail "prometheus is not installed (scripts/install-deps installs it)"

step "kvtierd with metrics on a free port and an NVMe tier"
{ read -r MPORT; read -r PPORT; } < <(free_ports 2)
start_kvtierd "$WORK/d" --listen 127.0.0.1:0 --host-tier-bytes 64MiB \
  --set host_tier.slab_bytes=1MiB --set "metrics.listen=127.0.0.1:$MPORT" \
  --set "nvme.dirs=$WORK/nvme" --set nvme.bytes_per_dir=64MiB --set limits.max_block_bytes=1MiB \
  --set nvme.slab_bytes=4MiB --set nvme.write_policy=write_through --set nvme.mover_interval_ms=20 \
  --set costmodel.probe_tiers=false --set peer.transport=off
grep -q "metrics on http://127.0.0.1:$MPORT/metrics" "$WORK/d.err" || fail "metrics address not logged"

step "traffic: put, get and a miss"
head -c 1000000 /dev/urandom >"$WORK/in.bin"
"$KVTIER" --addr "$ADDR" put "$WORK/in.bin" >"$WORK/keys.txt"
# shellcheck disable=SC2046
"$KVTIER" --addr "$ADDR" get $(cat "$WORK/keys.txt") -o "$WORK/out.bin"
cmp "$WORK/in.bin" "$WORK/out.bin" || fail "round trip"
"$KVTIER" --addr "$ADDR" get deadbeef -o "$WORK/miss.bin" 2>/dev/null || true

step "the endpoint itself"
curl -sf "http://127.0.0.1:$MPORT/metrics" >"$WORK/metrics.txt" || fail "GET /metrics"
grep -q '^kvtier_blocks_put_total 4$' "$WORK/metrics.txt" || fail "blocks_put: $(grep blocks_put "$WORK/metrics.txt")"
grep -q '^# TYPE kvtier_rpc_duration_seconds histogram' "$WORK/metrics.txt" || fail "no RPC histogram"

step "every metric the Grafana dashboard and the alert rules use is exported"
python3 "$(dirname "$0")/../../deploy/check_dashboards.py" "$(dirname "$0")/../../deploy" "$WORK/metrics.txt"

step "Prometheus scrapes it"
cat >"$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: kvtierd
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
YAML
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$PPORT" >"$WORK/prom.log" 2>&1 &
PIDS+=("$!")

# query EXPR: prints the first result's value ("" when there is none).
query() {
  curl -sf --get "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}
up=""
for _ in $(seq 1 150); do
  up=$(query 'up{job="kvtierd"}' 2>/dev/null || true)
  [[ "$up" == "1" ]] && break
  sleep 0.2
done
[[ "$up" == "1" ]] || fail "Prometheus never scraped kvtierd: $(tail -5 "$WORK/prom.log")"

expect() {  # expect EXPR VALUE
  local got
  got=$(query "$1")
  [[ "$got" == "$2" ]] || fail "$1 = '$got', expected '$2'"
  echo "  $1 = $got"
}
expect_some() {  # expect_some EXPR: a series exists
  local got
  got=$(query "$1")
  [[ -n "$got" ]] || fail "no series for $1"
  echo "  $1 = $got"
}
expect 'kvtier_blocks_put_total' 4
expect 'kvtier_bytes_put_total' 1000000
expect 'kvtier_blocks_get_total' 4
expect 'kvtier_tier_capacity_bytes{tier="host"}' 67108864
expect 'kvtier_tier_blocks{tier="host"}' 4
expect 'kvtier_rpc_requests_total{service="kvtier.v1.KvCache",method="Put",code="OK",tenant="none"}' 1
expect 'kvtier_rpc_requests_total{method="Get",code="NOT_FOUND"}' 1
expect 'kvtier_rpc_duration_seconds_count{method="Put"}' 1
expect_some 'histogram_quantile(0.99, sum by (le) (kvtier_rpc_duration_seconds_bucket{method="Get"}))'
expect 'kvtier_tenant_blocks{tenant="none"}' 4
expect_some 'kvtier_namespace_bytes{tenant="none"}'
expect_some 'kvtier_wear_budget_bytes_per_day'
expect_some 'kvtier_planner_plans_fetch_total'
expect 'kvtier_stranded_blocks' 0
echo "PASS"
