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
  rec->evictable = false;
  rec->last_access = ++clock_;
  records_.emplace(full, std::move(record));
  if (parent != nullptr) {
    parent->children.insert(rec);
    UpdateEvictable(parent);
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
  }
  return owned;
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
  const bool was_evictable = record->evictable;
  if (was_evictable) {
    record->evictable = false;
    evictable_.erase(record->last_access);
    evictable_by_class_[record->slot.size_class].erase(record->last_access);
  }
  record->last_access = ++clock_;
  UpdateEvictable(record);
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

BlockRecord* PrefixIndex::ColdestEvictable(std::optional<uint32_t> size_class) const {
  if (size_class.has_value()) {
    if (*size_class >= evictable_by_class_.size()) return nullptr;
    const auto& set = evictable_by_class_[*size_class];
    return set.empty() ? nullptr : set.begin()->second;
  }
  return evictable_.empty() ? nullptr : evictable_.begin()->second;
}

uint64_t PrefixIndex::CountStranded() const {
  uint64_t stranded = 0;
  for (const auto& [k, rec] : records_) {
    if (!rec->parent_key.empty() && Find(rec->ns, rec->parent_key) == nullptr) ++stranded;
  }
  return stranded;
}

void PrefixIndex::UpdateEvictable(BlockRecord* record) {
  const bool should = record->indexed && record->children.empty() && !record->pinned();
  if (should == record->evictable) return;
  const uint32_t cls = record->slot.size_class;
  if (evictable_by_class_.size() <= cls) evictable_by_class_.resize(cls + 1);
  if (should) {
    evictable_.emplace(record->last_access, record);
    evictable_by_class_[cls].emplace(record->last_access, record);
  } else {
    evictable_.erase(record->last_access);
    evictable_by_class_[cls].erase(record->last_access);
  }
  record->evictable = should;
}

}  // namespace kvtier
