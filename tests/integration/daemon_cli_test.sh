#!/usr/bin/env bash
# End-to-end check of the real binaries, as an operator uses them:
#   kvtierd refuses a malformed config (naming the key) and exits 2;
#   kvtierd starts on embedded defaults (ephemeral port), answers
#   `kvtier status --json`, round-trips a file through put/get byte-exact,
#   reports a missing key with exit 1 and no partial output, serves a unix
#   socket, and stops cleanly (exit 0) on SIGINT and SIGTERM;
#   with an NVMe tier (write-through), the blocks of a file survive a restart
#   and are served byte-exact from NVMe; a second daemon on the same data
#   directory is refused.
# Usage: daemon_cli_test.sh KVTIERD KVTIER
set -euo pipefail
KVTIERD=$1
KVTIER=$2
source "$(dirname "$0")/cli_test_lib.sh"

# Starts kvtierd with extra args; sets DAEMON_PID and ADDR (from its log).
start_daemon() {
  local log=$1; shift
  start_kvtierd "$log" --set metrics.listen=127.0.0.1:0 "$@"
}

stop_daemon() {
  local sig=$1 log=$2
  kill "-$sig" "$DAEMON_PID"
  local rc=0
  wait "$DAEMON_PID" || rc=$?
  [[ $rc -eq 0 ]] || { cat "$log.err" >&2; fail "kvtierd exited $rc after SIG$sig"; }
  grep -q "kvtierd stopped cleanly" "$log.err" || fail "no clean-stop message after SIG$sig"
}

step "malformed config: unknown key is named, exit 2"
printf 'host_tier:\n  bytez: 1GiB\n' >"$WORK/bad.yaml"
rc=0; "$KVTIERD" --config "$WORK/bad.yaml" --listen 127.0.0.1:0 2>"$WORK/bad.err" || rc=$?
[[ $rc -eq 2 ]] || fail "expected exit 2 for an unknown key, got $rc"
grep -q "host_tier.bytez" "$WORK/bad.err" || fail "error does not name the key: $(cat "$WORK/bad.err")"
printf 'server: [unclosed\n' >"$WORK/bad2.yaml"
rc=0; "$KVTIERD" --config "$WORK/bad2.yaml" 2>"$WORK/bad2.err" || rc=$?
[[ $rc -eq 2 ]] || fail "expected exit 2 for invalid YAML, got $rc"
rc=0; "$KVTIERD" --config "$WORK/missing.yaml" 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "expected exit 2 for a missing config file, got $rc"

step "--print-config shows every section; file < flag precedence"
printf 'host_tier:\n  bytes: 512MiB\nlog:\n  level: warn\n' >"$WORK/good.yaml"
"$KVTIERD" --config "$WORK/good.yaml" --log-level debug --print-config >"$WORK/eff.yaml"
grep -q "bytes: 536870912" "$WORK/eff.yaml" || fail "YAML value not applied"
grep -q "level: debug" "$WORK/eff.yaml" || fail "flag did not override YAML"

# Every daemon here keeps its NVMe tier (if any) inside $WORK.
# Small slabs: the files' odd-sized tail blocks each take a slab of their class.
NVME=(--set "nvme.dirs=$WORK/nvme" --set nvme.bytes_per_dir=256MiB
      --set limits.max_block_bytes=1MiB --set nvme.slab_bytes=4MiB
      --set nvme.write_policy=write_through --set nvme.mover_interval_ms=20)
NO_NVME=(--set nvme.dirs=)

step "start (ephemeral port, nvme tier in a temp dir)"
start_daemon "$WORK/d1" --listen 127.0.0.1:0 "${NVME[@]}"
grep -q "^server:" "$WORK/d1.out" || fail "effective configuration not printed"
"$KVTIER" --addr "$ADDR" status --json >"$WORK/status.json"
grep -q "\"listen_address\": \"$ADDR\"" "$WORK/status.json" || fail "status --json: $(cat "$WORK/status.json")"
grep -q '"stranded_blocks": "0"' "$WORK/status.json" || fail "stranded_blocks missing"
grep -q '"policy": "value"' "$WORK/status.json" || fail "status --json lacks the eviction policy"
"$KVTIER" --addr "$ADDR" status | grep -q "policy value" || fail "status text lacks the eviction policy"
grep -q '"planner"' "$WORK/status.json" || fail "status --json lacks the planner"
"$KVTIER" --addr "$ADDR" status | grep -q "planner:" || fail "status text lacks the planner line"
"$KVTIER" --addr "$ADDR" status | grep -q "gpu:" || fail "status text"

step "put / get round trip"
head -c 3000017 /dev/urandom >"$WORK/in.bin"
"$KVTIER" --addr "$ADDR" put "$WORK/in.bin" >"$WORK/keys.txt"
[[ $(wc -l <"$WORK/keys.txt") -eq 12 ]] || fail "expected 12 keys for 3000017 bytes at 256 KiB"
# shellcheck disable=SC2046
"$KVTIER" --addr "$ADDR" get $(cat "$WORK/keys.txt") -o "$WORK/out.bin"
cmp "$WORK/in.bin" "$WORK/out.bin" || fail "round trip is not byte-exact"
"$KVTIER" --addr "$ADDR" put --block-bytes 64KiB --json "$WORK/in.bin" >"$WORK/put.json"
grep -q '"block_bytes": 65536' "$WORK/put.json" || fail "put --json"
"$KVTIER" --addr "$ADDR" tiers --json | grep -q '"TIER_KIND_HOST"' || fail "tiers --json"
[[ $("$KVTIER" --addr "$ADDR" namespaces | wc -l) -eq 2 ]] || fail "expected two namespaces"

step "missing key: exit 1, no output file"
rc=0; "$KVTIER" --addr "$ADDR" get "$(head -1 "$WORK/keys.txt")" deadbeef -o "$WORK/miss.bin" 2>"$WORK/miss.err" || rc=$?
[[ $rc -eq 1 ]] || fail "expected exit 1, got $rc"
grep -q NOT_FOUND "$WORK/miss.err" || fail "missing key error: $(cat "$WORK/miss.err")"
[[ ! -e "$WORK/miss.bin" && ! -e "$WORK/miss.bin.kvtier-partial" ]] || fail "partial output left behind"
rc=0; "$KVTIER" --addr "$ADDR" get zz -o "$WORK/x.bin" 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "bad hex key should be a usage error"

step "second daemon on the same port, or on the same nvme directory, fails"
rc=0; "$KVTIERD" --listen "$ADDR" --host-tier-bytes 64MiB "${NO_NVME[@]}" >/dev/null 2>"$WORK/dup.err" || rc=$?
[[ $rc -eq 1 ]] || fail "expected exit 1 for an address in use, got $rc"
rc=0; "$KVTIERD" --listen 127.0.0.1:0 --host-tier-bytes 64MiB "${NVME[@]}" >/dev/null 2>"$WORK/dup2.err" || rc=$?
[[ $rc -eq 1 ]] || fail "expected exit 1 for an nvme directory in use, got $rc"
grep -q "catalog" "$WORK/dup2.err" || fail "nvme directory in use: $(cat "$WORK/dup2.err")"

step "write-through reaches nvme"
for _ in $(seq 1 100); do
  demoted=$("$KVTIER" --addr "$ADDR" status --json | sed -n 's/.*"demotions": "\([0-9]*\)".*/\1/p')
  [[ "${demoted:-0}" -eq 58 ]] && break  # 12 blocks of 256 KiB + 46 of 64 KiB
  sleep 0.1
done
[[ "${demoted:-0}" -eq 58 ]] || fail "blocks did not reach nvme (demotions=${demoted:-none})"
"$KVTIER" --addr "$ADDR" tiers >"$WORK/tiers.txt"
grep -q "^TIER .*CAPACITY .*USED .*BLOCKS .*HITS% .*READ BW" "$WORK/tiers.txt" || fail "tiers header: $(cat "$WORK/tiers.txt")"
grep -q "^nvme " "$WORK/tiers.txt" || fail "tiers does not list the nvme tier: $(cat "$WORK/tiers.txt")"
grep -q "^host .* 58 " "$WORK/tiers.txt" || fail "tiers host row: $(cat "$WORK/tiers.txt")"

step "operator views: health, blocks, watch, evict (each also --json)"
"$KVTIER" --addr "$ADDR" health | grep -q "SERVING" || fail "health"
[[ $("$KVTIER" --addr "$ADDR" --json health) == '{"status": "SERVING"}' ]] || fail "health --json"
NS1=$("$KVTIER" --addr "$ADDR" namespaces | awk '/ 12 blocks,/ {print $1}')
"$KVTIER" --addr "$ADDR" blocks --namespace "$NS1" --top 5 >"$WORK/blocks.txt"
[[ $(grep -c " host,nvme " "$WORK/blocks.txt") -eq 5 ]] || fail "blocks: $(cat "$WORK/blocks.txt")"
grep -q "^5 of [0-9]* blocks, most used first" "$WORK/blocks.txt" || fail "blocks footer"
"$KVTIER" --addr "$ADDR" --json blocks --namespace "$NS1" --top 2 | grep -q '"total_blocks"' || fail "blocks --json"
rc=0; "$KVTIER" --addr "$ADDR" blocks --namespace 00 2>/dev/null || rc=$?
[[ $rc -eq 1 ]] || fail "blocks with a bad namespace id should exit 1, got $rc"
"$KVTIER" --addr "$ADDR" watch --count 2 --interval 0.2 >"$WORK/watch.txt"
[[ $(grep -c "^kvtierd .* up " "$WORK/watch.txt") -eq 2 ]] || fail "watch did not refresh twice"
[[ $("$KVTIER" --addr "$ADDR" --json watch --count 2 --interval 0.2 | wc -l) -eq 2 ]] || fail "watch --json"
"$KVTIER" --addr "$ADDR" tiers --json | grep -q '"hit_ratio"' || fail "tiers --json"
"$KVTIER" --addr "$ADDR" namespaces --json | grep -q '"tenant"' || fail "namespaces --json lacks the tenant"
rc=0; "$KVTIER" --addr "$ADDR" evict 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "evict without a scope should be a usage error"
# The second put namespace (64 KiB blocks) goes; the first stays.
NS2=$("$KVTIER" --addr "$ADDR" namespaces | awk '/ 46 blocks,/ {print $1}')
# Block events: a watcher with a snapshot sees NS2's 46 blocks on host and
# nvme, then each leaving both tiers in the evict below.
"$KVTIER" --addr "$ADDR" events --namespace "$NS2" --snapshot --count 184 --seconds 30 \
  >"$WORK/events.txt" &
EVENTS_PID=$!
for _ in $(seq 1 100); do
  grep -q "^-- snapshot done" "$WORK/events.txt" 2>/dev/null && break
  sleep 0.1
done
grep -q "^-- snapshot done" "$WORK/events.txt" || fail "events: no snapshot"
"$KVTIER" --addr "$ADDR" --json evict --namespace "$NS2" >"$WORK/evict.json"
wait "$EVENTS_PID" || fail "kvtier events failed"
[[ $(grep -c "^stored  host $NS2 " "$WORK/events.txt") -eq 46 ]] || fail "events: host snapshot"
[[ $(grep -c "^stored  nvme $NS2 " "$WORK/events.txt") -eq 46 ]] || fail "events: nvme snapshot"
[[ $(grep -c "^removed host $NS2 " "$WORK/events.txt") -eq 46 ]] || fail "events: host removals"
[[ $(grep -c "^removed nvme $NS2 " "$WORK/events.txt") -eq 46 ]] || fail "events: nvme removals"
"$KVTIER" --addr "$ADDR" cluster | grep -q "^block events: [1-9][0-9]* reported" ||
  fail "cluster does not report block events"
rc=0; "$KVTIER" --addr "$ADDR" events --namespace zz --count 1 2>/dev/null || rc=$?
[[ $rc -eq 1 ]] || fail "events with a bad namespace id should exit 1, got $rc"
grep -q '"blocks_evicted": "46"' "$WORK/evict.json" || fail "evict: $(cat "$WORK/evict.json")"
grep -q '"done": true' "$WORK/evict.json" || fail "evict did not finish"
# shellcheck disable=SC2046
"$KVTIER" --addr "$ADDR" get $(cat "$WORK/keys.txt") -o "$WORK/still.bin"
cmp "$WORK/in.bin" "$WORK/still.bin" || fail "evicting one namespace touched another"
"$KVTIER" --addr "$ADDR" wear >"$WORK/wear.txt"
grep -q "admission to nvme: open" "$WORK/wear.txt" || fail "wear: $(cat "$WORK/wear.txt")"
grep -q "SMART: " "$WORK/wear.txt" || fail "wear does not report SMART"
"$KVTIER" --addr "$ADDR" wear --json | grep -q '"bytes_written": "[1-9]' || fail "wear --json"

step "SIGINT stops cleanly"
stop_daemon INT "$WORK/d1"
rc=0; "$KVTIER" --addr "$ADDR" --timeout 2 status >/dev/null 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "kvtier status against a stopped daemon should exit 1"

step "wear budget exhausted: admission stops, requests succeed, kvtier wear says why"
start_daemon "$WORK/d4" --listen 127.0.0.1:0 --set "nvme.dirs=$WORK/nvme-wear" \
  --set nvme.bytes_per_dir=64MiB --set limits.max_block_bytes=1MiB --set nvme.slab_bytes=4MiB \
  --set nvme.write_policy=write_through --set nvme.mover_interval_ms=20 \
  --set nvme.device_capacity_bytes=1GiB --set nvme.dwpd=0.001 --set nvme.wear_burst_seconds=60
"$KVTIER" --addr "$ADDR" put "$WORK/in.bin" >"$WORK/keys4.txt"
sleep 0.5
"$KVTIER" --addr "$ADDR" wear >"$WORK/wear4.txt"
grep -q "admission to nvme: CLOSED: .*over its write budget" "$WORK/wear4.txt" || fail "wear: $(cat "$WORK/wear4.txt")"
# shellcheck disable=SC2046
"$KVTIER" --addr "$ADDR" get $(cat "$WORK/keys4.txt") -o "$WORK/out4.bin"
cmp "$WORK/in.bin" "$WORK/out4.bin" || fail "reads must still succeed over budget"
stop_daemon TERM "$WORK/d4"

step "restart: persisted blocks are served byte-exact from nvme"
start_daemon "$WORK/d3" --listen 127.0.0.1:0 "${NVME[@]}"
"$KVTIER" --addr "$ADDR" status --json >"$WORK/status3.json"
grep -q '"recovered_blocks": "[1-9]' "$WORK/status3.json" || fail "nothing recovered: $(cat "$WORK/status3.json")"
# shellcheck disable=SC2046
"$KVTIER" --addr "$ADDR" get $(cat "$WORK/keys.txt") -o "$WORK/out3.bin"
cmp "$WORK/in.bin" "$WORK/out3.bin" || fail "file read back after restart differs"
"$KVTIER" --addr "$ADDR" status --json | grep -q '"promotions": "12"' || fail "blocks were not promoted from nvme"
stop_daemon TERM "$WORK/d3"

step "backup and restore of the nvme tier (docs/operations.md): stop, archive, wipe, restore"
tar -C "$WORK" -cSf "$WORK/nvme-backup.tar" nvme
rm -rf "$WORK/nvme"
tar -C "$WORK" -xSf "$WORK/nvme-backup.tar"
start_daemon "$WORK/d5" --listen 127.0.0.1:0 "${NVME[@]}"
# shellcheck disable=SC2046
"$KVTIER" --addr "$ADDR" get $(cat "$WORK/keys.txt") -o "$WORK/out5.bin"
cmp "$WORK/in.bin" "$WORK/out5.bin" || fail "restored nvme tier served different bytes"
stop_daemon TERM "$WORK/d5"

step "unix socket; SIGTERM stops cleanly"
start_daemon "$WORK/d2" --listen "unix:$WORK/kvtier.sock" --host-tier-bytes 64MiB "${NO_NVME[@]}" \
  --set costmodel.gpu=h100-sxm
"$KVTIER" --addr "unix:$WORK/kvtier.sock" status --json | grep -q '"namespaces": 0' || fail "unix socket status"

step "kvtier replay drives the daemon like an engine (shared memory, plans, byte checks)"
# A synthetic Mooncake-format trace: 60 requests over 6 shared system prompts.
python3 - "$WORK/trace.jsonl" <<'PY'
import json, random, sys
rng = random.Random(7)
next_id = 1000
prefixes = [list(range(p * 100, p * 100 + 4)) for p in range(6)]
with open(sys.argv[1], "w") as f:
    for i in range(60):
        ids = list(prefixes[rng.randrange(6)])
        for _ in range(rng.randrange(1, 4)):
            ids.append(next_id)
            next_id += 1
        f.write(json.dumps({"timestamp": i * 10, "input_length": 512 * len(ids) - 100,
                            "output_length": 8, "hash_ids": ids}) + "\n")
PY
"$KVTIER" --addr "unix:$WORK/kvtier.sock" replay "$WORK/trace.jsonl" --block-bytes 4KiB \
  --no-progress --json >"$WORK/replay.json" || fail "replay failed: $(cat "$WORK/replay.json")"
python3 - "$WORK/replay.json" <<'PY' || fail "replay summary: $(cat "$WORK/replay.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["requests"] == 60, r["requests"]
assert r["wrong_bytes_blocks"] == 0 and r["load_failures"] == 0 and r["rpc_errors"] == 0
assert r["blocks_hit"] >= 54 * 4, r["blocks_hit"]  # every repeat of a prefix hits it
assert 0 < r["token_hit_ratio"] < 1
assert r["blocks_fetched"] + r["blocks_recomputed_by_plan"] == r["blocks_hit"]
assert r["blocks_saved"] == r["blocks_looked_up"] - r["blocks_hit"]
d = r["plan_decisions"]
assert d["no_plan"] == 0 and d["fetch_all"] + d["partial"] + d["recompute"] > 0, d
assert r["blocks_fetched"] > 0
PY
stop_daemon TERM "$WORK/d2"

echo "daemon_cli_test: all checks passed"
