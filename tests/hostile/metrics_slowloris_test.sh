#!/usr/bin/env bash
# Hostile item 8: slow HTTP clients must not stall the Prometheus endpoint.
# 200 connections each send an incomplete request head ("GET /metrics
# HTTP/1.1", a Host line, never the blank line) and stay open; a concurrent
# scrape must still get a full 200 answer within 2 s. They come from
# 127.0.0.1, the scraper's own address (a local process is the likely
# attacker: the endpoint binds loopback by default), so no per-address limit
# may protect the scrape.
# Then the endpoint's other behaviour: its content type, 404 for other paths,
# and a start on a metrics port in use failing with a clear error.
# Usage: metrics_slowloris_test.sh KVTIERD KVTIER
set -euo pipefail
KVTIERD=$1
HERE=$(dirname "$0")
# shellcheck source=../integration/cli_test_lib.sh
source "$HERE/../integration/cli_test_lib.sh"

step "kvtierd with metrics on a free port"
start_kvtierd "$WORK/d" --listen 127.0.0.1:0 --host-tier-bytes 64MiB --set host_tier.slab_bytes=1MiB \
  --set limits.max_block_bytes=1MiB --set metrics.listen=127.0.0.1:0 --set nvme.dirs= \
  --set costmodel.probe_tiers=false --set peer.transport=off
MADDR=$(sed -n 's|.*metrics on http://\(.*\)/metrics$|\1|p' "$WORK/d.err" | head -1)
[[ "$MADDR" =~ ^127\.0\.0\.1:[1-9][0-9]*$ ]] || fail "metrics address not logged: $(cat "$WORK/d.err")"
URL="http://$MADDR/metrics"

# scrape WHAT: a full scrape within 2 s, 200, the text format, kvtier_ series.
scrape() {
  local out
  out=$(curl -sS --max-time 2 -o "$WORK/metrics.txt" -w '%{http_code} %{content_type}' "$URL") ||
    fail "$1: no scrape within 2 s"
  [[ "$out" == "200 text/plain; version=0.0.4"* ]] || fail "$1: answered '$out'"
  grep -q '^kvtier_build_info{' "$WORK/metrics.txt" || fail "$1: no kvtier_build_info"
  grep -q "^kvtier_tier_capacity_bytes{tier=\"host\"} 67108864$" "$WORK/metrics.txt" ||
    fail "$1: no host tier capacity"
  echo "  $1: 200, $(grep -c '^kvtier_' "$WORK/metrics.txt") kvtier_ samples"
}
scrape "before"

step "200 connections that never finish their request head"
mkfifo "$WORK/hold.in"
python3 "$HERE/hold_connections.py" "$MADDR" 200 'GET /metrics HTTP/1.1\r\nHost: x\r\n' \
  --source 127.0.0.1 <"$WORK/hold.in" >"$WORK/hold.out" &
PIDS+=("$!")
exec 3>"$WORK/hold.in"
for _ in $(seq 1 300); do
  grep -q "^open" "$WORK/hold.out" && break
  sleep 0.1
done
grep -q "^open 200$" "$WORK/hold.out" || fail "expected 200 connections: $(cat "$WORK/hold.out")"
scrape "while they are open"
# Several times, each within its 2 s, while the connections are still held.
for i in 1 2 3; do scrape "again ($i)"; done
exec 3>&-

step "other paths and methods"
code=$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' "http://$MADDR/nope")
[[ "$code" == 404 ]] || fail "GET /nope answered $code, expected 404"
code=$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' -X POST "$URL")
[[ "$code" == 405 ]] || fail "POST /metrics answered $code, expected 405"

step "a metrics port in use fails the start"
rc=0
"$KVTIERD" --listen 127.0.0.1:0 --host-tier-bytes 64MiB --set host_tier.slab_bytes=1MiB \
  --set limits.max_block_bytes=1MiB --set "metrics.listen=$MADDR" --set nvme.dirs= \
  --set costmodel.probe_tiers=false --set peer.transport=off >/dev/null 2>"$WORK/dup.err" || rc=$?
[[ $rc -eq 1 ]] || fail "expected exit 1 for a metrics port in use, got $rc"
grep -q "cannot serve metrics on '$MADDR'" "$WORK/dup.err" || fail "unclear error: $(cat "$WORK/dup.err")"
grep -q "cannot serve metrics on '$MADDR'" "$WORK/dup.err" && echo "  $(grep -o "cannot serve metrics.*" "$WORK/dup.err" | head -1)"
kill -0 "$DAEMON_PID" || fail "kvtierd died"
echo "PASS"
