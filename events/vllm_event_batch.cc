#include "events/vllm_event_batch.h"

#include <vector>

#include "msgpack.hpp"

namespace kvtier {
namespace {

void PackBin(msgpack::packer<msgpack::sbuffer>& pk, const BlockKey& key) {
  pk.pack_bin(static_cast<uint32_t>(key.size()));
  pk.pack_bin_body(key.bytes().data(), static_cast<uint32_t>(key.size()));
}

void PackStr(msgpack::packer<msgpack::sbuffer>& pk, absl::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

// One run of events that becomes one vLLM event: [begin, end).
struct Run {
  size_t begin;
  size_t end;
};

std::vector<Run> Runs(absl::Span<const BlockEvent> events) {
  std::vector<Run> runs;
  for (size_t i = 0; i < events.size(); ++i) {
    if (!runs.empty()) {
      const BlockEvent& prev = events[i - 1];
      const BlockEvent& e = events[i];
      const bool same = e.kind == prev.kind && e.medium == prev.medium;
      const bool joins = same && (e.kind == BlockEvent::Kind::kRemoved || e.parent == prev.key);
      if (joins) {
        runs.back().end = i + 1;
        continue;
      }
    }
    runs.push_back(Run{i, i + 1});
  }
  return runs;
}

}  // namespace

std::string EncodeVllmEventBatch(double ts, absl::Span<const BlockEvent> events,
                                 uint32_t tokens_per_block, bool all_cleared_first) {
  const std::vector<Run> runs = Runs(events);
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(2);
  pk.pack_double(ts);
  pk.pack_array(static_cast<uint32_t>(runs.size() + (all_cleared_first ? 1 : 0)));
  if (all_cleared_first) {
    pk.pack_array(1);
    PackStr(pk, "AllBlocksCleared");
  }
  for (const Run& run : runs) {
    const BlockEvent& first = events[run.begin];
    const auto n = static_cast<uint32_t>(run.end - run.begin);
    if (first.kind == BlockEvent::Kind::kStored) {
      pk.pack_array(8);
      PackStr(pk, "BlockStored");
      pk.pack_array(n);
      for (size_t i = run.begin; i < run.end; ++i) PackBin(pk, events[i].key);
      if (first.parent.empty()) {
        pk.pack_nil();
      } else {
        PackBin(pk, first.parent);
      }
      pk.pack_array(0);  // token_ids: not held by kvtier
      pk.pack_uint32(tokens_per_block);
      pk.pack_nil();  // lora_id
      PackStr(pk, MediumName(first.medium));
      pk.pack_nil();  // lora_name
    } else {
      pk.pack_array(3);
      PackStr(pk, "BlockRemoved");
      pk.pack_array(n);
      for (size_t i = run.begin; i < run.end; ++i) PackBin(pk, events[i].key);
      PackStr(pk, MediumName(first.medium));
    }
  }
  return std::string(buf.data(), buf.size());
}

}  // namespace kvtier
