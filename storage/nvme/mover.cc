#include "storage/nvme/mover.h"

#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "spdlog/spdlog.h"
#include "storage/nvme/catalog.h"
#include "storage/nvme/slot_header.h"
#include "storage/nvme/write_policy.h"

namespace kvtier {

Mover::Pass Mover::Select() {
  Pass pass;
  const NvmeTierOptions& o = nvme_->options();
  const DemotionRule& rule = nvme_->rule();
  const DemotionPass plan = PlanDemotionPass(rule, host_->used_bytes(), host_->capacity());
  if (!plan.run) return pass;
  const bool pressure = plan.host_pressure;
  double scheduled = 0;
  // At most a batch of leaves (each brings at least one block), coldest
  // first, among those the policy admits.
  const std::vector<BlockRecord*> leaves = index_->ColdestCandidates(
      PrefixIndex::kHostOnlyLeaf, o.mover_batch, [&](const BlockRecord& r) {
        const DemotionCandidate candidate{.uses = r.uses,
                                          .namespace_admits = namespaces_->AdmitsNvme(r.ns),
                                          .retained = r.retention > kMinRetention};
        switch (DecideDemotion(rule, candidate, pressure)) {
          case DemotionVerdict::kWrite:
            return true;
          case DemotionVerdict::kRefusedValue:
            ++counters_->admissions_refused_value;
            return false;
          case DemotionVerdict::kRefusedFilter:
            ++counters_->admissions_refused_filter;
            return false;
          case DemotionVerdict::kSkip:
            return false;
        }
        return false;
      });
  NvmeStore& store = nvme_->store();
  absl::flat_hash_set<BlockRecord*> chosen;
  bool full = false;
  for (BlockRecord* leaf : leaves) {
    if (pass.blocks.size() >= o.mover_batch || scheduled >= plan.bytes_needed || full) break;
    // The leaf and its ancestors not yet on NVMe, written parents first:
    // the persisted set stays prefix-closed, so a crash strands nothing.
    std::vector<BlockRecord*> chain;
    for (BlockRecord* r = leaf; r != nullptr && !r->on_nvme && !chosen.contains(r); r = r->parent) {
      chain.push_back(r);
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      BlockRecord* r = *it;
      absl::StatusOr<NvmeSlot> slot = store.Allocate(r->size);
      // Make room by dropping cold blocks held only on NVMe, a bounded
      // number (they may belong to other size classes and free nothing).
      for (int tries = 0;
           !slot.ok() && tries < 16 && slot.status().code() == absl::StatusCode::kResourceExhausted;
           ++tries) {
        BlockRecord* victim = index_->Coldest(PrefixIndex::kNvmeOnlyLeaf, std::nullopt);
        if (victim == nullptr) break;
        host_->Evict(victim);
        ++counters_->nvme_evictions;
        slot = store.Allocate(r->size);
      }
      if (!slot.ok()) {
        ++counters_->admissions_refused_full;
        full = true;
        break;
      }
      if (!nvme_->wear(slot->device).TryConsume(kSlotHeaderBytes + RoundUpToIo(r->size))) {
        // Over the SSD write budget: stop admitting; requests still succeed.
        store.Free(*slot);
        ++counters_->admissions_refused_budget;
        full = true;
        break;
      }
      chosen.insert(r);
      index_->AddRef(r);
      pass.blocks.push_back(r);
      SlotHeader h{r->ns, r->key, r->parent_key(), r->size, r->checksum, store.NextSequence()};
      pass.writes.push_back({*slot, h, host_->SlotData(r->slot), nvme_->ArenaBuffer(r->slot)});
      scheduled += static_cast<double>(host_->class_bytes(r->slot.size_class));
    }
  }
  return pass;
}

void Mover::Write(Pass& pass) {
  if (pass.empty()) return;
  // Data first, made durable by Write; only then the catalog commit.
  pass.results = nvme_->store().Write(pass.writes);
  // A block whose parent is in this batch and failed is failed too: the
  // catalog must never hold a child without its parent. Parents precede
  // their children in the batch.
  absl::flat_hash_map<const BlockRecord*, size_t> position;
  for (size_t i = 0; i < pass.blocks.size(); ++i) position[pass.blocks[i]] = i;
  for (size_t i = 0; i < pass.blocks.size(); ++i) {
    auto p = position.find(pass.blocks[i]->parent);
    if (pass.results[i].ok() && p != position.end() && !pass.results[p->second].ok()) {
      pass.results[i] = absl::AbortedError("its parent's nvme write failed");
    }
  }
  std::vector<CatalogEntry> entries;
  for (size_t i = 0; i < pass.blocks.size(); ++i) {
    if (!pass.results[i].ok()) continue;
    const NvmeWrite& w = pass.writes[i];
    entries.push_back({w.header.ns, w.header.key, w.header.parent, w.slot.device,
                       w.slot.slot.offset, static_cast<uint32_t>(w.slot.slot.size_class),
                       w.header.payload_bytes, w.header.payload_checksum, w.header.sequence});
  }
  pass.committed = entries.empty() ? absl::OkStatus() : nvme_->catalog().PutBatch(entries);
}

size_t Mover::Finish(Pass& pass) {
  size_t written = 0;
  if (pass.empty()) return written;
  bool all_ok = pass.committed.ok();
  for (size_t i = 0; i < pass.blocks.size(); ++i) {
    BlockRecord* r = pass.blocks[i];
    const NvmeWrite& w = pass.writes[i];
    const uint64_t wear_bytes = kSlotHeaderBytes + RoundUpToIo(r->size);
    if (!pass.results[i].ok() || !pass.committed.ok()) {
      all_ok = false;
      nvme_->wear(w.slot.device).Refund(wear_bytes);
      nvme_->FreeSlot(w.slot);
      ++counters_->nvme_write_failures;
      nvme_->NoteWriteFailure(pass.results[i].ok() ? pass.committed.message()
                                                   : pass.results[i].message());
    } else {
      // Also for a block removed meanwhile: its NVMe slot is then freed
      // (and its catalog entry removed) with the rest of its storage.
      nvme_->wear(w.slot.device).RecordWrite(wear_bytes);
      r->on_nvme = true;
      r->nvme = w.slot;
      r->nvme_sequence = w.header.sequence;
      if (r->indexed) {
        nvme_->AddBlock(r->size);
        ++counters_->demotions;
        counters_->bytes_host_to_nvme += r->size;
        ++written;
        host_->NoteStored(*r, Medium::kNvme);
      } else {
        nvme_->catalog().Delete(r->ns, r->key).IgnoreError();
      }
    }
    host_->Unpin(r);  // reclassifies the block
  }
  if (all_ok) nvme_->NoteWritesOk();
  if (!all_ok) spdlog::warn("nvme tier degraded: {}", nvme_->last_error());
  return written;
}

void Mover::Balance() {
  const NvmeTierOptions& o = nvme_->options();
  const double host_capacity = static_cast<double>(host_->capacity());
  if (host_->used_bytes() > o.host_high_watermark * host_capacity) {
    while (host_->used_bytes() > o.host_low_watermark * host_capacity) {
      BlockRecord* copy = index_->Coldest(PrefixIndex::kHostCopy, std::nullopt);
      if (copy == nullptr) break;
      host_->DropHostCopy(copy);
    }
  }
  NvmeStore& store = nvme_->store();
  const double nvme_capacity = static_cast<double>(store.capacity_bytes());
  if (static_cast<double>(store.used_bytes()) > o.nvme_high_watermark * nvme_capacity) {
    while (static_cast<double>(store.used_bytes()) > o.nvme_low_watermark * nvme_capacity) {
      BlockRecord* victim = index_->Coldest(PrefixIndex::kNvmeOnlyLeaf, std::nullopt);
      if (victim == nullptr) break;
      host_->Evict(victim);
      ++counters_->nvme_evictions;
    }
  }
}

}  // namespace kvtier
