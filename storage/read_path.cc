#include "storage/read_path.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/checksum.h"
#include "spdlog/spdlog.h"
#include "storage/nvme/slot_header.h"

namespace kvtier {

absl::StatusOr<std::vector<BlockRecord*>> ReadPath::Pin(const NamespaceId& ns,
                                                        absl::Span<const BlockKey> keys,
                                                        Allocate allocate, Promotion* promotion) {
  for (const BlockKey& key : keys) {
    if (index_->Find(ns, key) == nullptr) {
      return absl::NotFoundError(absl::StrCat("block ", key.ToHex(), " is not cached"));
    }
  }
  std::vector<BlockRecord*> pinned;
  pinned.reserve(keys.size());
  for (const BlockKey& key : keys) {
    BlockRecord* rec = index_->Find(ns, key);
    index_->AddRef(rec);
    index_->Touch(rec);
    ++rec->uses;
    pinned.push_back(rec);
  }
  // Blocks held only on NVMe are promoted: a host slot is reserved here,
  // filled and verified by Promote, and published by Publish.
  absl::flat_hash_set<BlockRecord*> promoting;
  for (BlockRecord* rec : pinned) {
    if (rec->in_host || !promoting.insert(rec).second) continue;  // or a repeated key
    absl::StatusOr<Slot> slot = allocate(rec->size);
    if (!slot.ok()) {
      for (auto& [r, s] : promotion->blocks) host_->Free(s);
      promotion->blocks.clear();
      promotion->reads.clear();
      for (BlockRecord* r : pinned) host_->Unpin(r);
      return slot.status();
    }
    promotion->blocks.emplace_back(rec, *slot);
    SlotHeader expect{rec->ns,   rec->key,      rec->parent_key(),
                      rec->size, rec->checksum, rec->nvme_sequence};
    promotion->reads.push_back(
        {rec->nvme, expect, host_->SlotData(*slot), nvme_->ArenaBuffer(*slot)});
  }
  return pinned;
}

void ReadPath::Promote(Promotion& promotion, TransferMeter* meter) {
  if (promotion.empty()) return;
  const absl::Time read_start = absl::Now();
  promotion.results = nvme_->store().Read(promotion.reads);
  const absl::Duration read_time = absl::Now() - read_start;
  uint64_t read_bytes = 0;
  bool all_read = true;
  for (size_t i = 0; i < promotion.blocks.size(); ++i) {
    read_bytes += promotion.blocks[i].first->size;
    all_read = all_read && promotion.results[i].ok();
  }
  if (all_read) meter->Record(read_bytes, read_time);
}

absl::Status ReadPath::Publish(Promotion& promotion) {
  std::vector<BlockRecord*> failed;
  for (size_t i = 0; i < promotion.blocks.size(); ++i) {
    auto& [rec, slot] = promotion.blocks[i];
    if (rec->in_host) {
      // A concurrent reader promoted it first: its copy serves us too.
      host_->Free(slot);
      continue;
    }
    const absl::Status& result = promotion.results[i];
    if (!result.ok()) {
      host_->Free(slot);
      ++counters_->nvme_read_failures;
      nvme_->NoteReadFailure(result);
      spdlog::error("nvme read of block {} failed: {}", rec->key.ToHex(),
                    std::string(result.message()));
      failed.push_back(rec);
      continue;
    }
    // The bytes were read and verified. A block removed meanwhile (we pin
    // it) keeps this copy until its last unpin frees it with the rest of its
    // storage, so our pin stays valid; only an indexed block is counted.
    rec->slot = slot;
    rec->in_host = true;
    ++counters_->nvme_hits;
    if (rec->indexed) {
      host_->AddHostCopy(rec);
      ++counters_->promotions;
      counters_->bytes_nvme_to_host += rec->size;
    }
  }
  if (failed.empty()) return absl::OkStatus();
  const std::string message =
      absl::StrCat("block ", failed.front()->key.ToHex(), " could not be read from nvme (",
                   nvme_->last_error(), ") and was dropped");
  for (BlockRecord* rec : failed) {
    if (rec->indexed) host_->DropSubtree(rec);
  }
  return absl::NotFoundError(message);
}

std::vector<BlockRecord*> ReadPath::Verify(absl::Span<BlockRecord* const> blocks,
                                           TransferMeter* meter) const {
  std::vector<BlockRecord*> corrupt;
  const absl::Time verify_start = absl::Now();
  uint64_t verified_bytes = 0;
  for (BlockRecord* rec : blocks) {
    verified_bytes += rec->size;
    if (Checksum64({host_->SlotData(rec->slot), rec->size}) != rec->checksum) {
      corrupt.push_back(rec);
    }
  }
  meter->Record(verified_bytes, absl::Now() - verify_start);
  return corrupt;
}

absl::Status ReadPath::Finish(absl::Span<BlockRecord* const> blocks,
                              absl::Span<BlockRecord* const> corrupt) {
  if (!corrupt.empty()) {
    const std::string message = absl::StrCat("block ", corrupt.front()->key.ToHex(),
                                             " failed its checksum and was dropped");
    for (BlockRecord* rec : corrupt) DropCorrupt(rec);
    return absl::NotFoundError(message);
  }
  for (BlockRecord* rec : blocks) {
    ++counters_->blocks_get;
    counters_->bytes_get += rec->size;
  }
  return absl::OkStatus();
}

void ReadPath::DropCorrupt(BlockRecord* rec) {
  if (!rec->indexed) return;  // already dropped (a repeated key, or a concurrent reader)
  ++counters_->checksum_mismatches;
  spdlog::error(
      "block {} of namespace {} failed its checksum; dropping it and its cached descendants",
      rec->key.ToHex(), rec->ns.ToHex());
  host_->DropSubtree(rec);  // the caller's pin keeps the record alive
}

}  // namespace kvtier
