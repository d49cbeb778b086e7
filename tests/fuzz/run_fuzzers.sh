#!/usr/bin/env bash
# Runs the libFuzzer targets (libFuzzer + ASan + UBSan) for SECONDS each
# (default 60) from their committed seed corpora:
#   handler_fuzz  the daemon's request handlers (KvCache, Peer, Admin)
#   planner_fuzz  the planner's Hugging Face config parser and reports
#   storage_fuzz  NVMe slot headers and catalog records read back from disk
#   config_fuzz   the daemon's YAML configuration
#   put_chunk_fuzz  the Put stream's message parser (server/put_chunk_frame.h)
#                   against protobuf's
# With BUILD_DIR (a CMake build with KVTIER_BUILD_FUZZ=ON, as `make
# test-asan` makes) the targets come from BUILD_DIR/fuzz; without it the
# three small ones are compiled here with clang and handler_fuzz and
# put_chunk_fuzz are skipped.
# A crash leaves its input in OUT_DIR (crash-*) and fails the script; turn it
# into a regression test before fixing.
#   tests/fuzz/run_fuzzers.sh [SECONDS] [OUT_DIR] [BUILD_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_TO_RUN=${1:-60}
OUT=${2:-$ROOT/build-fuzz}
PREBUILT=${3:-}
mkdir -p "$OUT"
CXX="clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I$ROOT"
ABSL=$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format absl_synchronization)
COSTMODEL=("$ROOT"/costmodel/{attention_roofline,block_sharing,catalog,deployment,fetch_plan,hf_config,hf_hybrid_layers,kv_footprint,kv_quant,memory_budget,model_spec,pd_link,preemption,tier_value}.cc)

# Each source is compiled once (into $OUT/obj, two at a time), then linked
# into the targets that need it.
compile() {
  mkdir -p "$OUT/obj"
  printf '%s\n' "$@" | sort -u | xargs -P 2 -I{} sh -c \
    'o="$0/obj/$(echo "$1" | sed "s|/|_|g").o"; [ "$o" -nt "$1" ] || $2 -c "$1" -o "$o"' \
    "$OUT" {} "$CXX"
}
objs() { for f in "$@"; do echo "$OUT/obj/$(echo "$f" | sed 's|/|_|g').o"; done; }
link() {  # name sources... -- libs...
  local name=$1; shift
  local srcs=()
  while [[ $1 != -- ]]; do srcs+=("$1"); shift; done; shift
  echo "=== linking $name"
  # shellcheck disable=SC2046,SC2086
  $CXX $(objs "${srcs[@]}") -o "$OUT/$name" "$@" $ABSL
}

PLANNER=("${COSTMODEL[@]}"
         "$ROOT"/client/planner/{planner_reports,memory_reports,transfer_reports,model_reports}.cc
         "$ROOT"/client/planner/{sharing_reports,report_format}.cc "$ROOT"/tests/fuzz/planner_fuzz.cc)
STORAGE=("$ROOT"/storage/{slot_header,checksum,catalog,block_key,namespace_spec}.cc
         "$ROOT"/tests/fuzz/storage_fuzz.cc)
CONFIG=("$ROOT"/server/config.cc "${COSTMODEL[@]}" "$ROOT"/tests/fuzz/config_fuzz.cc)
TARGETS=(planner storage config)
if [[ -n "$PREBUILT" ]]; then
  for t in handler planner storage config put_chunk; do
    [[ -x "$PREBUILT/fuzz/${t}_fuzz" ]] || { echo "no $PREBUILT/fuzz/${t}_fuzz" >&2; exit 1; }
    cp "$PREBUILT/fuzz/${t}_fuzz" "$OUT/"
  done
  TARGETS=(handler planner storage config put_chunk)
else
  echo "=== compiling (handler_fuzz and put_chunk_fuzz need a CMake fuzz build; skipped)"
  compile "${PLANNER[@]}" "${STORAGE[@]}" "${CONFIG[@]}"
  link planner_fuzz "${PLANNER[@]}" --
  link storage_fuzz "${STORAGE[@]}" -- -lrocksdb -lxxhash
  link config_fuzz "${CONFIG[@]}" -- -lyaml-cpp -lspdlog -lfmt
fi

status=0
for t in "${TARGETS[@]}"; do
  mkdir -p "$OUT/${t}_corpus"
  cp "$ROOT"/tests/fuzz/${t}_corpus/* "$OUT/${t}_corpus/"
  echo "=== ${t}_fuzz for ${SECONDS_TO_RUN}s"
  if ! "$OUT/${t}_fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=10 \
      -artifact_prefix="$OUT/${t}-" "$OUT/${t}_corpus" 2>&1 | tail -4; then
    status=1
  fi
done
exit $status
