#include "storage/namespace_table.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "spdlog/spdlog.h"

namespace kvtier {

absl::Status NamespaceNotOpenError(const NamespaceId& ns) {
  return absl::NotFoundError(
      absl::StrCat("namespace ", ns.ToHex(), " is not open; call OpenNamespace first"));
}

absl::StatusOr<OpenedNamespace> NamespaceTable::Open(const NamespaceId& id, NamespaceSpec spec,
                                                     uint64_t block_bytes) {
  auto it = entries_.find(id);
  if (it != entries_.end() && it->second.opened) return OpenedNamespace{block_bytes, false};
  // Opening counts against the limit, also for a namespace whose blocks were
  // recovered from NVMe (those take no slot until opened).
  const size_t open = open_count();
  if (open >= max_namespaces_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this daemon already has ", open, " namespaces open (max_namespaces)"));
  }
  RETURN_IF_ERROR(quotas_->ChargeNamespace(spec.tenant));
  if (it != entries_.end()) {
    const std::string model = spec.model_id;
    it->second.spec = std::move(spec);
    it->second.block_bytes = block_bytes;
    it->second.opened = true;
    spdlog::info("re-opened namespace {} (model '{}', {} blocks recovered)", id.ToHex(), model,
                 it->second.blocks);
    return OpenedNamespace{block_bytes, false};
  }
  spdlog::info("opened namespace {} (model '{}', {} bytes per block)", id.ToHex(), spec.model_id,
               block_bytes);
  entries_.emplace(id,
                   NamespaceEntry{std::move(spec), block_bytes, 0, 0, true, true, std::nullopt});
  return OpenedNamespace{block_bytes, true};
}

void NamespaceTable::OpenGroups(const NamespaceId& id, const NamespaceSpec& spec,
                                const std::vector<uint64_t>& block_bytes) {
  const bool admit = AdmitsNvme(id);
  for (uint32_t g = 0; g < block_bytes.size(); ++g) {
    NamespaceEntry& e = entries_[NamespaceId::OfGroup(id, g)];
    e.spec = spec;
    e.block_bytes = block_bytes[g];
    e.opened = true;
    e.nvme_admit = admit;
    e.group_of = GroupOf{id, g};
  }
}

absl::StatusOr<NamespaceEntry*> NamespaceTable::FindOpen(const NamespaceId& id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.opened || it->second.group_of.has_value()) {
    return NamespaceNotOpenError(id);
  }
  return &it->second;
}

NamespaceEntry* NamespaceTable::FindAny(const NamespaceId& id) {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

void NamespaceTable::Close(const NamespaceId& id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.opened) return;
  it->second.opened = false;
  quotas_->RefundNamespace(it->second.spec.tenant);
  spdlog::info("closed namespace {} (model '{}')", id.ToHex(), it->second.spec.model_id);
  const size_t groups = it->second.spec.hybrid() ? it->second.spec.groups.size() : 0;
  // As for a namespace known only from recovery: it goes with its last
  // block, or now if it holds none.
  if (it->second.blocks == 0) entries_.erase(it);
  for (uint32_t g = 0; g < groups; ++g) {
    auto group = entries_.find(NamespaceId::OfGroup(id, g));
    if (group == entries_.end()) continue;
    group->second.opened = false;
    if (group->second.blocks == 0) entries_.erase(group);
  }
}

absl::Status NamespaceTable::SetWithGroups(const NamespaceId& id,
                                           const std::function<void(NamespaceEntry&)>& set) {
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("namespace ", id.ToHex(), " is not open"));
  }
  set(it->second);
  // A hybrid's blocks are its groups': they follow it.
  if (it->second.spec.hybrid()) {
    for (uint32_t g = 0; g < it->second.spec.groups.size(); ++g) {
      auto group = entries_.find(NamespaceId::OfGroup(id, g));
      if (group != entries_.end()) set(group->second);
    }
  }
  return absl::OkStatus();
}

absl::Status NamespaceTable::SetNvmeAdmission(const NamespaceId& id, bool admit) {
  return SetWithGroups(id, [admit](NamespaceEntry& e) { e.nvme_admit = admit; });
}

absl::Status NamespaceTable::SetRetentionValue(const NamespaceId& id, double seconds_per_byte) {
  return SetWithGroups(
      id, [seconds_per_byte](NamespaceEntry& e) { e.retention_value = seconds_per_byte; });
}

double NamespaceTable::MeanRetentionValue() const {
  double log_sum = 0;
  int n = 0;
  for (const auto& [id, e] : entries_) {
    if (e.group_of.has_value() || !e.opened || e.retention_value <= 0) continue;
    log_sum += std::log(e.retention_value);
    ++n;
  }
  return n == 0 ? 0 : std::exp(log_sum / n);
}

bool NamespaceTable::AdmitsNvme(const NamespaceId& id) const {
  auto it = entries_.find(id);
  return it == entries_.end() || it->second.nvme_admit;
}

void NamespaceTable::AddBlocks(NamespaceEntry* entry, uint64_t blocks, uint64_t bytes) {
  entry->blocks += blocks;
  entry->bytes += bytes;
  total_bytes_ += bytes;
}

void NamespaceTable::AddRecoveredBlock(const NamespaceId& id, uint64_t bytes) {
  NamespaceEntry& entry = entries_[id];
  if (entry.block_bytes == 0) entry.opened = false;  // known from NVMe only, until opened
  AddBlocks(&entry, 1, bytes);
}

void NamespaceTable::CountEviction(const NamespaceId& id) {
  if (auto it = entries_.find(id); it != entries_.end()) ++it->second.evictions;
}

void NamespaceTable::RemoveBlock(const NamespaceId& id, uint64_t bytes) {
  auto it = entries_.find(id);
  NamespaceEntry& entry = it->second;
  entry.blocks -= 1;
  entry.bytes -= bytes;
  total_bytes_ -= bytes;
  // A namespace known only from recovered blocks goes away with its last one.
  if (!entry.opened && entry.blocks == 0) entries_.erase(it);
}

size_t NamespaceTable::open_count() const {
  return static_cast<size_t>(std::count_if(entries_.begin(), entries_.end(), [](const auto& e) {
    return e.second.opened && !e.second.group_of;
  }));
}

}  // namespace kvtier
