#include "transfer/pending_table.h"

namespace kvtier {

std::unique_ptr<StageEntry> PendingTable::AddStage(std::string id,
                                                   std::unique_ptr<StageEntry> entry) {
  if (full()) return entry;
  stages_.emplace(std::move(id), std::move(entry));
  return nullptr;
}

std::unique_ptr<ExportEntry> PendingTable::AddExport(std::string id,
                                                     std::unique_ptr<ExportEntry> entry) {
  if (full()) return entry;
  exports_.emplace(std::move(id), std::move(entry));
  return nullptr;
}

std::unique_ptr<StageEntry> PendingTable::TakeStage(const std::string& id) {
  auto it = stages_.find(id);
  if (it == stages_.end()) return nullptr;
  std::unique_ptr<StageEntry> entry = std::move(it->second);
  stages_.erase(it);
  return entry;
}

std::unique_ptr<ExportEntry> PendingTable::TakeExport(const std::string& id) {
  auto it = exports_.find(id);
  if (it == exports_.end()) return nullptr;
  std::unique_ptr<ExportEntry> entry = std::move(it->second);
  exports_.erase(it);
  return entry;
}

void PendingTable::Quarantine(absl::Time until, std::unique_ptr<BlockCache::PutBatch> batch) {
  quarantine_.emplace_back(until, std::move(batch));
}

PendingTable::Expired PendingTable::TakeExpired(absl::Time now) {
  Expired out;
  for (auto& [until, batch] : quarantine_) {
    if (until <= now) out.released.push_back(std::move(batch));
  }
  std::erase_if(quarantine_, [](const auto& q) { return q.second == nullptr; });
  absl::erase_if(stages_, [&](auto& kv) {
    if (kv.second->expiry > now) return false;
    out.stages.push_back(std::move(kv.second));
    return true;
  });
  absl::erase_if(exports_, [&](auto& kv) {
    if (kv.second->expiry > now) return false;
    out.exports.push_back(std::move(kv.second));
    return true;
  });
  return out;
}

void PendingTable::Clear() {
  stages_.clear();
  exports_.clear();
  quarantine_.clear();
}

}  // namespace kvtier
