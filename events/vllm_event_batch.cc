#include "events/vllm_event_batch.h"

#include <vector>

#include "msgpack.hpp"

namespace kvtier {
namespace {

void PackHash(msgpack::packer<msgpack::sbuffer>& pk, const BlockKey& key, bool as_int) {
  if (as_int) {
    pk.pack_uint64(IntBlockHash(key));
    return;
  }
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
      const bool same = e.kind == prev.kind && e.medium == prev.medium && e.ns == prev.ns;
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

uint64_t IntBlockHash(const BlockKey& key) {
  uint64_t v = 0;
  for (unsigned char c : key.bytes()) v = (v << 8) | c;  // keeps the low 64 bits
  return v;
}

std::string EncodeVllmEventBatch(double ts, absl::Span<const BlockEvent> events,
                                 const VllmBatchOptions& options) {
  const std::vector<Run> runs = Runs(events);
  const bool as_int = options.int_hashes;
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(2);
  pk.pack_double(ts);
  pk.pack_array(static_cast<uint32_t>(runs.size() + (options.all_cleared_first ? 1 : 0)));
  if (options.all_cleared_first) {
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
      for (size_t i = run.begin; i < run.end; ++i) PackHash(pk, events[i].key, as_int);
      if (first.parent.empty()) {
        pk.pack_nil();
      } else {
        PackHash(pk, first.parent, as_int);
      }
      pk.pack_array(0);  // token_ids: not held by kvtier
      pk.pack_uint32(options.block_size(first.ns));
      pk.pack_nil();  // lora_id
      PackStr(pk, MediumName(first.medium));
      pk.pack_nil();  // lora_name
    } else {
      pk.pack_array(3);
      PackStr(pk, "BlockRemoved");
      pk.pack_array(n);
      for (size_t i = run.begin; i < run.end; ++i) PackHash(pk, events[i].key, as_int);
      PackStr(pk, MediumName(first.medium));
    }
  }
  return std::string(buf.data(), buf.size());
}

}  // namespace kvtier
