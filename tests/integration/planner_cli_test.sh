#!/usr/bin/env bash
# `kvtier plan` as an operator runs it: every subcommand answers in text and
# in JSON with its documented keys (docs/planner.md), and bad input exits 2
# with a message naming the problem.
# Usage: planner_cli_test.sh KVTIER TESTDATA_DIR
set -euo pipefail
KVTIER=$1
DATA=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# keys FILE KEY... : FILE is a JSON object holding every KEY (dotted paths allowed).
keys() {
  local file=$1; shift
  python3 - "$file" "$@" <<'PY' || fail "$(cat "$file")"
import json, sys
obj = json.load(open(sys.argv[1]))
for path in sys.argv[2:]:
    node = obj
    for part in path.split("."):
        if isinstance(node, list):
            node = node[int(part)]
        elif part in node:
            node = node[part]
        else:
            sys.exit(f"missing key {path}")
PY
}

# value FILE KEY EXPECTED : the JSON value at KEY (dotted path) equals EXPECTED
# (numbers compared as numbers, to 1e-9 relative).
value() {
  python3 - "$@" <<'PY' || fail "$(cat "$1")"
import json, math, sys
node = json.load(open(sys.argv[1]))
for part in sys.argv[2].split("."):
    node = node[int(part)] if isinstance(node, list) else node[part]
want = sys.argv[3]
try:
    ok = math.isclose(float(node), float(want), rel_tol=1e-9)
except (TypeError, ValueError):
    ok = str(node) == want
if not ok:
    sys.exit(f"{sys.argv[2]} = {node!r}, expected {want}")
PY
}

# run NAME ARGS... : text and JSON output of one plan subcommand.
run() {
  local name=$1; shift
  "$KVTIER" plan "$@" >"$WORK/$name.txt" || fail "kvtier plan $* exited $?"
  [[ -s "$WORK/$name.txt" ]] || fail "kvtier plan $*: no text"
  "$KVTIER" plan "$@" --json >"$WORK/$name.json" || fail "kvtier plan $* --json failed"
}

run kv kv --model llama-3.1-8b --tp 16 --context 8192
keys "$WORK/kv.json" kv_bytes_per_token kv_bytes_per_token_per_gpu kv_heads_per_gpu \
  kv_replication bytes_per_block_per_gpu layer_groups.0.kind layer_groups.0.layers \
  layer_groups.0.window kv_bytes_per_gpu_at_context sliding_window_saving_fraction \
  recurrent_state_bytes_per_request tp_warning inputs.model
grep -q "2 (K,V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131072" "$WORK/kv.txt" ||
  fail "kv text lacks the arithmetic: $(cat "$WORK/kv.txt")"
grep -q "WARNING: TP 16" "$WORK/kv.txt" || fail "TP past the KV heads is not flagged"

run kv_mla kv --model-config "$DATA/mla_deepseek.json" --gpu h200 --tp 8
value "$WORK/kv_mla.json" kv_replication 8
value "$WORK/kv_mla.json" kv_bytes_per_token_per_gpu 70272

run budget budget --model llama-3.1-8b --util 0.9 --cudagraph-bytes 1000000000
keys "$WORK/budget.json" items.0.name items.0.bytes items.0.measured_by_engine items.0.note \
  kv_budget_bytes_per_gpu max_blocks_per_gpu max_tokens_per_gpu longest_request_tokens

run fetch fetch --model llama-3.2-1b --tokens 4096 --tier nvme --bandwidth 2e9
keys "$WORK/fetch.json" recompute_seconds fetch_seconds breakeven_bandwidth_bytes_per_s decision \
  cut_blocks
value "$WORK/fetch.json" decision recompute
run fetch_cut fetch --model llama-3.1-8b --tokens 480 --tiers host:10,nvme:20 \
  --tier-bandwidth host=20e9,nvme=1e9
value "$WORK/fetch_cut.json" cut_blocks 10

run tiers tiers --model llama-3.2-1b --ssd micron-7450-max-3.2tb --write-rate 100e6
keys "$WORK/tiers.json" tiers.0.name tiers.0.value_seconds_per_token tiers.0.worthwhile \
  ssd.tbw_bytes ssd.sustainable_write_bytes_per_s ssd.days_to_wear_out
run tiers_custom tiers --model llama-3.1-70b --ssd-capacity-bytes 1e12 --ssd-dwpd 1 \
  --ssd-warranty-years 5
value "$WORK/tiers_custom.json" ssd.days_to_wear_out 1825
value "$WORK/tiers_custom.json" ssd.tbw_bytes 1825e12

run pd pd --model llama-3.2-1b --gpu b200
keys "$WORK/pd.json" required_link_bytes_per_s_per_gpu links.0.name links.0.sufficient

run preempt preempt --model llama-3.1-8b --victim-tokens 8192
keys "$WORK/preempt.json" recompute_seconds swap_out_seconds swap_in_seconds policies.0.who_pays

run mla mla --model deepseek-v3 --gpu h200 --tp 8
keys "$WORK/mla.json" flops_per_cached_token bytes_per_cached_token arithmetic_intensity \
  ridge_point regime
value "$WORK/mla.json" regime compute-bound
value "$WORK/mla.json" flops_per_cached_token 278528

run quant quant --model llama-3.1-8b --k-layout per-channel --v-layout per-token --group 128
keys "$WORK/quant.json" bytes_per_token residual_tokens

printf '100\n# comment\n500\n' >"$WORK/amax.txt"
run fp8 fp8 --model llama-3.1-8b --scale 1 --amax-file "$WORK/amax.txt"
value "$WORK/fp8.json" clip_rate 0.5

run sharing sharing --model llama-3.1-8b --prompts "$DATA/prompts_trace.jsonl"
keys "$WORK/sharing.json" blocks_without_sharing blocks_with_sharing saving_fraction cow_copies
value "$WORK/sharing.json" blocks_with_sharing 7
value "$WORK/sharing.json" blocks_without_sharing 10

run strand strand --model llama-3.1-8b --prompts "$DATA/prompts_tokens.jsonl" --block-tokens 4 \
  --capacity-blocks 2
keys "$WORK/strand.json" policies.0.stranded_blocks_final policies.1.stranded_blocks_final
value "$WORK/strand.json" policies.1.eviction leaf_first
value "$WORK/strand.json" policies.1.stranded_blocks_peak 0

run state state --model-config "$DATA/recurrent_hybrid.json" --checkpoint-interval 100
keys "$WORK/state.json" state_bytes_per_request state_bytes_per_checkpoint restart_boundary_tokens
value "$WORK/state.json" restart_boundary_tokens 400

# Hybrid families read from their config.json (numbers: costmodel/hf_config_test.cc).
hybrid() {  # hybrid FIXTURE KV_BYTES_PER_TOKEN STATE_BYTES_PER_REQUEST
  local name=${1%.json}
  run "kv_$name" kv --model-config "$DATA/$1" --context 8192
  value "$WORK/kv_$name.json" kv_bytes_per_token "$2"
  value "$WORK/kv_$name.json" recurrent_state_bytes_per_request "$3"
  run "state_$name" state --model-config "$DATA/$1" --checkpoint-interval 256
  value "$WORK/state_$name.json" state_bytes_per_request "$3"
}
hybrid gemma3_multimodal.json 139264 0
value "$WORK/kv_gemma3_multimodal.json" layer_groups.0.window 1024
value "$WORK/kv_gemma3_multimodal.json" layer_groups.0.layers 29
value "$WORK/kv_gemma3_multimodal.json" kv_bytes_per_gpu_at_context 289406976
hybrid qwen3_next.json 24576 39518208
hybrid nemotron_h.json 16384 51806208
value "$WORK/kv_nemotron_h.json" layer_groups.1.kind mlp_only
hybrid jamba.json 16384 8716288
hybrid mamba2_codestral.json 0 138149888
value "$WORK/state_mamba2_codestral.json" recurrent_layers 64

# Bad input: exit 2 and a message that names the problem.
expect_bad() {
  local want=$1; shift
  local rc=0
  "$KVTIER" plan "$@" >"$WORK/bad.out" 2>"$WORK/bad.err" || rc=$?
  [[ $rc -eq 2 ]] || fail "kvtier plan $*: expected exit 2, got $rc"
  grep -q -- "$want" "$WORK/bad.err" || fail "kvtier plan $*: message lacks '$want': $(cat "$WORK/bad.err")"
  [[ ! -s "$WORK/bad.out" ]] || fail "kvtier plan $*: printed a report despite the error"
}
expect_bad "llama-3.1-8b" kv
expect_bad "--tokens is required" fetch --model llama-3.1-8b
expect_bad "unknown model 'llama-9'" kv --model llama-9
expect_bad "unknown GPU" kv --model llama-3.1-8b --gpu tpu
expect_bad "cannot read" kv --model-config "$WORK/none.json"
echo '{"num_hidden_layers": "x"}' >"$WORK/bad.json"
expect_bad "num_hidden_layers" kv --model-config "$WORK/bad.json"
sed 's/"M-M-M-M\*/"M-M-E-M*/' "$DATA/nemotron_h.json" >"$WORK/bad_nemotron.json"
expect_bad "hybrid_override_pattern: layer 4 is 'E'" state --model-config "$WORK/bad_nemotron.json"
expect_bad "neither divides" kv --model llama-3.1-8b --tp 3
expect_bad "--kv-dtype" kv --model llama-3.1-8b --kv-dtype int4
expect_bad "not a number" kv --model llama-3.1-8b --mfu 2
expect_bad "--tiers" fetch --model llama-3.1-8b --tokens 10 --tiers host10
expect_bad "MLA" quant --model deepseek-v3
expect_bad "unknown SSD" tiers --model llama-3.1-8b --ssd nope --ssd-capacity-bytes 1e12 \
  --ssd-dwpd 1 --ssd-warranty-years 5
expect_bad "go together" tiers --model llama-3.1-8b --ssd-dwpd 1
expect_bad "not a number" fetch --model llama-3.1-8b --tokens inf
expect_bad "not a number" kv --model llama-3.1-8b --context nan
expect_bad "not a number" kv --model llama-3.1-8b --context -100
expect_bad "not a number" budget --model llama-3.1-8b --gpu-mem-bytes 3e23
expect_bad "not a number" fetch --model llama-3.1-8b --tokens 100 --bandwidth 0
echo "[1, 2" >"$WORK/bad.jsonl"
expect_bad "line 1" sharing --model llama-3.1-8b --prompts "$WORK/bad.jsonl"
echo "planner_cli_test: all checks passed"
