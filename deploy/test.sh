#!/usr/bin/env bash
# deploy/test.sh: proves the Docker Compose deployment end to end on one
# machine with no image registry:
#   1. starts a local Docker engine if none runs (host networking only);
#   2. builds a Debian 12 base image locally (debootstrap + docker import),
#      unless kvtier-base:bookworm exists;
#   3. builds the kvtier image (deploy/Dockerfile) and a Prometheus image;
#   4. brings up kvtierd-prefill, kvtierd-decode and prometheus
#      (docker-compose.yml; Grafana too when its image is present locally);
#   5. waits for both daemons' health checks;
#   6. puts and gets blocks through both daemons, pushes blocks from prefill
#      to decode over UCX and gets them back from decode byte-exact;
#   7. reads the daemons' metrics through Prometheus's HTTP API;
#   8. tears everything down (containers and volumes).
# Run as root from anywhere: bash deploy/test.sh. Takes about 10 minutes on
# 2 cores, most of it compiling in the build stage.
set -euo pipefail
cd "$(dirname "$0")"
DEPLOY=$PWD
ROOT=$(cd .. && pwd)
PROJECT=kvtiertest
COMPOSE=(docker-compose -f "$DEPLOY/docker-compose.yml" -p "$PROJECT")
ROOTFS=${KVTIER_ROOTFS:-/var/tmp/kvtier-rootfs}
step() { echo "=== $(date +%T) $*"; }
fail() { echo "deploy/test.sh: FAIL: $*" >&2; exit 1; }

STARTED_DOCKERD=""
cleanup() {
  step "tear down"
  "${COMPOSE[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
  if [[ -n "$STARTED_DOCKERD" ]]; then kill "$STARTED_DOCKERD" 2>/dev/null || true; fi
}
trap cleanup EXIT

step "docker engine"
if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null || fail "no docker engine (apt-get install docker.io)"
  # No bridge and no iptables: every container here uses host networking.
  dockerd --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
    >/var/tmp/kvtier-dockerd.log 2>&1 &
  STARTED_DOCKERD=$!
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || fail "dockerd did not start: $(tail -5 /var/tmp/kvtier-dockerd.log)"
fi
docker version --format 'engine {{.Server.Version}}'

step "Debian 12 base image"
if ! docker image inspect kvtier-base:bookworm >/dev/null 2>&1; then
  if [[ ! -x "$ROOTFS/usr/bin/apt-get" ]]; then
    command -v debootstrap >/dev/null || fail "debootstrap is missing (apt-get install debootstrap)"
    rm -rf "$ROOTFS"
    debootstrap --variant=minbase bookworm "$ROOTFS" http://deb.debian.org/debian
  fi
  tar -C "$ROOTFS" -c . | docker import - kvtier-base:bookworm
fi

step "build kvtier:local (deploy/Dockerfile)"
docker build --network host -t kvtier:local -f "$DEPLOY/Dockerfile" "$ROOT"
step "build kvtier-prometheus:local"
docker build --network host -t kvtier-prometheus:local "$DEPLOY/prometheus"
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '^kvtier'
docker run --rm --entrypoint id kvtier:local | grep -q 'uid=10001(kvtier)' || fail "image runs as root"

step "compose up"
SERVICES=(kvtierd-prefill kvtierd-decode prometheus)
if docker image inspect grafana/grafana-oss:10.4.2 >/dev/null 2>&1; then SERVICES+=(grafana); fi
"${COMPOSE[@]}" up -d "${SERVICES[@]}"

step "health checks"
for svc in kvtierd-prefill kvtierd-decode; do
  id=$("${COMPOSE[@]}" ps -q "$svc")
  state=""
  for _ in $(seq 1 90); do
    state=$(docker inspect --format '{{.State.Health.Status}}' "$id")
    [[ "$state" == healthy ]] && break
    [[ "$(docker inspect --format '{{.State.Running}}' "$id")" == true ]] ||
      { docker logs "$id" | tail -20; fail "$svc exited"; }
    sleep 1
  done
  [[ "$state" == healthy ]] || { docker logs "$id" | tail -20; fail "$svc is $state"; }
  echo "$svc: $state"
done

# kv SERVICE ARGS...: the kvtier CLI inside that service's container.
kv() { local svc=$1; shift; "${COMPOSE[@]}" exec -T "$svc" kvtier "$@"; }
P=127.0.0.1:50051
D=127.0.0.1:50052

step "put and get through each daemon"
for svc in kvtierd-prefill kvtierd-decode; do
  addr=$([[ $svc == kvtierd-prefill ]] && echo $P || echo $D)
  "${COMPOSE[@]}" exec -T "$svc" sh -c 'head -c 2500000 /dev/urandom > /tmp/in.bin'
  kv "$svc" --addr "$addr" put /tmp/in.bin --model "rt-$svc" >/tmp/kvtier-keys-$svc.txt
  # shellcheck disable=SC2046
  kv "$svc" --addr "$addr" get --model "rt-$svc" -o /tmp/out.bin $(cat /tmp/kvtier-keys-$svc.txt)
  "${COMPOSE[@]}" exec -T "$svc" cmp /tmp/in.bin /tmp/out.bin || fail "$svc round trip differs"
  echo "$svc: $(wc -l </tmp/kvtier-keys-$svc.txt) blocks round-tripped byte-exact"
done

step "prefill -> decode transfer over UCX"
"${COMPOSE[@]}" exec -T kvtierd-prefill sh -c 'head -c 4194304 /dev/urandom > /tmp/prompt.kv'
kv kvtierd-prefill --addr $P put /tmp/prompt.kv --block-bytes 1MiB >/tmp/kvtier-pd-keys.txt
mapfile -t KEYS </tmp/kvtier-pd-keys.txt
# The decode side's engine opens the same namespace (a get does, through the
# CLI) and does not have the blocks yet.
if kv kvtierd-decode --addr $D get --block-bytes 1MiB -o /tmp/early.kv "${KEYS[@]}" 2>/dev/null; then
  fail "decode had the blocks before the transfer"
fi
kv kvtierd-prefill --addr $P transfer --peer $D --push --block-bytes 1MiB "${KEYS[@]}"
kv kvtierd-decode --addr $D get --block-bytes 1MiB -o /tmp/back.kv "${KEYS[@]}"
"${COMPOSE[@]}" exec -T kvtierd-prefill cat /tmp/prompt.kv | sha256sum >/tmp/kvtier-a.sha
"${COMPOSE[@]}" exec -T kvtierd-decode cat /tmp/back.kv | sha256sum >/tmp/kvtier-b.sha
cmp /tmp/kvtier-a.sha /tmp/kvtier-b.sha || fail "decode served different bytes than prefill stored"
echo "transfer: ${#KEYS[@]} blocks pushed, decode serves them byte-exact"
kv kvtierd-prefill --addr $P peers

step "metrics through Prometheus"
query() {
  curl -sf --get "http://127.0.0.1:9090/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(" ".join("%s=%s" % (x["metric"].get("role", ""), x["value"][1]) for x in r))'
}
for _ in $(seq 1 60); do
  [[ "$(query 'sum(kvtier_peer_blocks_sent_total)' 2>/dev/null || true)" == "=4" ]] && break
  sleep 1
done
for q in 'up{job="kvtierd"}' 'kvtier_blocks_put_total' 'kvtier_blocks_get_total' \
         'kvtier_peer_blocks_sent_total' 'kvtier_tier_used_bytes{tier="host"}' \
         'sum by (role) (kvtier_rpc_requests_total{method="Put",code="OK"})' \
         'kvtier_wear_budget_bytes_per_day'; do
  r=$(query "$q")
  [[ -n "$r" ]] || fail "Prometheus has no series for $q"
  echo "  $q: $r"
done
[[ "$(query 'sum(kvtier_peer_blocks_sent_total)')" == "=4" ]] || fail "transfer not visible in Prometheus"
[[ "$(query 'count(up{job="kvtierd"} == 1)')" == "=2" ]] || fail "Prometheus does not see both daemons up"

step "PASS"
