#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (libFuzzer + ASan + UBSan) and runs
# each for SECONDS (default 60) from its committed seed corpus:
#   planner_fuzz  the planner's Hugging Face config parser and reports
#   storage_fuzz  NVMe slot headers and catalog records read back from disk
#   config_fuzz   the daemon's YAML configuration
# A crash leaves its input in OUT_DIR (crash-*) and fails the script; turn it
# into a regression test before fixing.
#   tests/fuzz/run_fuzzers.sh [SECONDS] [OUT_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_TO_RUN=${1:-60}
OUT=${2:-$ROOT/build-fuzz}
mkdir -p "$OUT"
CXX="clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I$ROOT"
ABSL=$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format absl_synchronization)
COSTMODEL=("$ROOT"/costmodel/{attention_roofline,block_sharing,catalog,deployment,fetch_plan,hf_config,kv_footprint,kv_quant,memory_budget,model_spec,pd_link,preemption,tier_value}.cc)

build() {  # name sources... -- libs...
  local name=$1; shift
  local srcs=() libs=()
  while [[ $1 != -- ]]; do srcs+=("$1"); shift; done; shift
  libs=("$@")
  echo "=== building $name"
  # shellcheck disable=SC2086
  $CXX "${srcs[@]}" -o "$OUT/$name" "${libs[@]}" $ABSL
}

build planner_fuzz "${COSTMODEL[@]}" "$ROOT"/client/planner/planner_reports.cc \
  "$ROOT"/tests/fuzz/planner_fuzz.cc --
build storage_fuzz "$ROOT"/storage/{slot_header,checksum,catalog,block_key,namespace_spec}.cc \
  "$ROOT"/tests/fuzz/storage_fuzz.cc -- -lrocksdb -lxxhash
build config_fuzz "$ROOT"/server/config.cc "${COSTMODEL[@]}" "$ROOT"/tests/fuzz/config_fuzz.cc \
  -- -lyaml-cpp -lspdlog -lfmt

status=0
for t in planner storage config; do
  mkdir -p "$OUT/${t}_corpus"
  cp "$ROOT"/tests/fuzz/${t}_corpus/* "$OUT/${t}_corpus/"
  echo "=== ${t}_fuzz for ${SECONDS_TO_RUN}s"
  if ! "$OUT/${t}_fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=10 \
      -artifact_prefix="$OUT/${t}-" "$OUT/${t}_corpus" 2>&1 | tail -4; then
    status=1
  fi
done
exit $status
