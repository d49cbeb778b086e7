#include "storage/prefix_index.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace kvtier {
namespace {

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "PrefixIndex: %s\n", what);
  std::abort();
}

}  // namespace

PrefixIndex::~PrefixIndex() = default;

BlockRecord* PrefixIndex::Find(const NamespaceId& ns, const BlockKey& key) const {
  auto it = records_.find(FullKey{ns, key});
  return it == records_.end() ? nullptr : it->second.get();
}

absl::Status PrefixIndex::Insert(std::unique_ptr<BlockRecord> record) {
  BlockRecord* parent = nullptr;
  if (!record->parent_key.empty()) {
    parent = Find(record->ns, record->parent_key);
    if (parent == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("parent ", record->parent_key.ToHex(),
                                                        " of block ", record->key.ToHex(),
                                                        " is not cached"));
    }
  }
  FullKey full{record->ns, record->key};
  if (records_.contains(full)) {
    return absl::AlreadyExistsError(
        absl::StrCat("block ", record->key.ToHex(), " is already cached"));
  }
  BlockRecord* rec = record.get();
  rec->parent = parent;
  rec->children.clear();
  rec->indexed = true;
  rec->candidate_of = 0;
  rec->last_access = ++clock_;
  records_.emplace(full, std::move(record));
  if (parent != nullptr) {
    parent->children.insert(rec);
    UpdateEvictable(parent);
  } else {
    roots_[rec->ns].insert(rec);
  }
  UpdateEvictable(rec);
  return absl::OkStatus();
}

std::unique_ptr<BlockRecord> PrefixIndex::Remove(BlockRecord* record) {
  if (!record->indexed) Die("Remove of a block that is not indexed");
  if (!record->children.empty()) Die("Remove of a block with cached children");
  auto it = records_.find(FullKey{record->ns, record->key});
  if (it == records_.end() || it->second.get() != record) Die("Remove of an unknown block");
  std::unique_ptr<BlockRecord> owned = std::move(it->second);
  records_.erase(it);
  record->indexed = false;
  UpdateEvictable(record);
  if (BlockRecord* parent = record->parent; parent != nullptr) {
    parent->children.erase(record);
    record->parent = nullptr;
    UpdateEvictable(parent);
  } else if (auto roots = roots_.find(record->ns); roots != roots_.end()) {
    roots->second.erase(record);
    if (roots->second.empty()) roots_.erase(roots);
  }
  return owned;
}

std::vector<BlockRecord*> PrefixIndex::Roots(const NamespaceId& ns) const {
  auto it = roots_.find(ns);
  if (it == roots_.end()) return {};
  return std::vector<BlockRecord*>(it->second.begin(), it->second.end());
}

std::vector<BlockRecord*> PrefixIndex::SubtreePostOrder(BlockRecord* root) const {
  std::vector<BlockRecord*> out;
  // Iterative DFS: a node is emitted after all of its children.
  std::vector<std::pair<BlockRecord*, bool>> stack = {{root, false}};
  while (!stack.empty()) {
    auto [rec, expanded] = stack.back();
    stack.pop_back();
    if (expanded) {
      out.push_back(rec);
      continue;
    }
    stack.push_back({rec, true});
    for (BlockRecord* child : rec->children) stack.push_back({child, false});
  }
  return out;
}

void PrefixIndex::Touch(BlockRecord* record) {
  const uint8_t was = record->candidate_of;
  SetCandidates(record, 0);
  record->last_access = ++clock_;
  SetCandidates(record, was);
}

void PrefixIndex::AddRef(BlockRecord* record) {
  ++record->refs;
  UpdateEvictable(record);
}

void PrefixIndex::DropRef(BlockRecord* record) {
  if (record->refs == 0) Die("DropRef below zero");
  --record->refs;
  UpdateEvictable(record);
}

void PrefixIndex::AddLease(BlockRecord* record) {
  ++record->leases;
  UpdateEvictable(record);
}

void PrefixIndex::DropLease(BlockRecord* record) {
  if (record->leases == 0) Die("DropLease below zero");
  --record->leases;
  UpdateEvictable(record);
}

BlockRecord* PrefixIndex::Coldest(Candidate kind, std::optional<uint32_t> host_class) const {
  if (host_class.has_value() && kind != kNvmeOnlyLeaf) {  // NVMe-only blocks have no host class
    const auto& per_class = by_class_[kind];
    if (*host_class >= per_class.size()) return nullptr;
    const auto& set = per_class[*host_class];
    return set.empty() ? nullptr : set.begin()->second;
  }
  return sets_[kind].empty() ? nullptr : sets_[kind].begin()->second;
}

uint64_t PrefixIndex::CountStranded(uint64_t* bytes) const {
  uint64_t stranded = 0, stranded_bytes = 0;
  for (const auto& [k, rec] : records_) {
    if (!rec->parent_key.empty() && Find(rec->ns, rec->parent_key) == nullptr) {
      ++stranded;
      stranded_bytes += rec->size;
    }
  }
  if (bytes != nullptr) *bytes = stranded_bytes;
  return stranded;
}

void PrefixIndex::UpdateEvictable(BlockRecord* record) {
  uint8_t want = 0;
  if (record->indexed && !record->pinned()) {
    const bool leaf = record->children.empty();
    if (record->in_host && !record->on_nvme && leaf) want |= 1 << kHostOnlyLeaf;
    if (record->in_host && record->on_nvme) want |= 1 << kHostCopy;
    if (!record->in_host && record->on_nvme && leaf) want |= 1 << kNvmeOnlyLeaf;
  }
  SetCandidates(record, want);
}

void PrefixIndex::SetCandidates(BlockRecord* record, uint8_t want) {
  // Leave every set under the class the record was filed with, then join the
  // wanted ones under its current class.
  for (int k = 0; k < kNumCandidates; ++k) {
    if ((record->candidate_of >> k) & 1) {
      sets_[k].erase(record->last_access);
      by_class_[k][record->candidate_class].erase(record->last_access);
    }
  }
  const uint32_t cls = record->slot.size_class;
  for (int k = 0; k < kNumCandidates; ++k) {
    if ((want >> k) & 1) {
      sets_[k].emplace(record->last_access, record);
      if (by_class_[k].size() <= cls) by_class_[k].resize(cls + 1);
      by_class_[k][cls].emplace(record->last_access, record);
    }
  }
  record->candidate_of = want;
  record->candidate_class = cls;
}

}  // namespace kvtier
