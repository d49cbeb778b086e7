#!/usr/bin/env bash
# Builds tests/fuzz/planner_fuzz with clang (libFuzzer + ASan + UBSan) and
# runs it for SECONDS (default 60) from the committed seed corpus.
#   tests/fuzz/run_planner_fuzz.sh [SECONDS] [OUT_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_TO_RUN=${1:-60}
OUT=${2:-$ROOT/build-fuzz}
mkdir -p "$OUT/corpus"
cp "$ROOT"/tests/fuzz/planner_corpus/* "$OUT/corpus/"
SRCS=("$ROOT"/costmodel/{attention_roofline,block_sharing,catalog,deployment,fetch_plan,hf_config,kv_footprint,kv_quant,memory_budget,model_spec,pd_link,preemption,tier_value}.cc
      "$ROOT"/client/planner/planner_reports.cc "$ROOT"/tests/fuzz/planner_fuzz.cc)
# shellcheck disable=SC2046
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$ROOT" "${SRCS[@]}" -o "$OUT/planner_fuzz" \
  $(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format)
"$OUT/planner_fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=10 \
  -artifact_prefix="$OUT/" "$OUT/corpus"
