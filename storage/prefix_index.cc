#include "storage/prefix_index.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "storage/eviction/leaf_lru_policy.h"

namespace kvtier {
namespace {

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "PrefixIndex: %s\n", what);
  std::abort();
}

}  // namespace

PrefixIndex::PrefixIndex(EvictionPolicy* policy, int tag_bits)
    : tag_bits_(tag_bits),
      tag_seed_(absl::Uniform<uint64_t>(absl::BitGen())),
      own_policy_(policy == nullptr ? std::make_unique<LeafLruPolicy>() : nullptr),
      policy_(policy == nullptr ? own_policy_.get() : policy),
      policy_clock_(policy_->clock()) {}

PrefixIndex::~PrefixIndex() = default;

BlockRecord* PrefixIndex::Find(const NamespaceId& ns, const BlockKey& key) const {
  auto table = tables_.find(ns);
  if (table == tables_.end()) return nullptr;
  return table->second.blocks.Find(key);
}

size_t PrefixIndex::MatchChain(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                               std::vector<BlockRecord*>* out) const {
  auto table = tables_.find(ns);
  if (table == tables_.end()) return 0;
  // The records of the leading keys that are cached (their misses
  // overlapped), then the run of them whose parent links hold.
  const size_t start = out->size();
  const size_t found = table->second.blocks.FindRun(keys, out);
  size_t matched = found;
  for (size_t i = 1; i < found; ++i) {
    if ((*out)[start + i]->parent != (*out)[start + i - 1]) {
      matched = i;
      break;
    }
  }
  out->resize(start + matched);
  return matched;
}

absl::Status PrefixIndex::Insert(std::unique_ptr<BlockRecord> record, const BlockKey& parent_key) {
  BlockRecord* parent = nullptr;
  if (!parent_key.empty()) {
    parent = Find(record->ns, parent_key);
    if (parent == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("parent ", parent_key.ToHex(), " of block ",
                                                        record->key.ToHex(), " is not cached"));
    }
  }
  Table& table = TableOf(record->ns);
  BlockRecord* rec = record.get();
  if (!table.blocks.Insert(record)) {
    return absl::AlreadyExistsError(absl::StrCat("block ", rec->key.ToHex(), " is already cached"));
  }
  rec->parent = parent;
  rec->first_child = rec->next_sibling = rec->prev_sibling = nullptr;
  rec->indexed = true;
  rec->candidate_of = 0;
  rec->refile_pending = false;
  rec->last_access = ++clock_;
  rec->clock_at_use = policy_clock_;
  policy_->OnInsert(rec);
  ++size_;
  if (parent != nullptr) {
    rec->next_sibling = parent->first_child;
    if (rec->next_sibling != nullptr) rec->next_sibling->prev_sibling = rec;
    parent->first_child = rec;
    // A parent inserted in this bulk load is not filed yet; one filed
    // before is no longer a leaf.
    if (!bulk_load_ || parent->candidate_of != 0) UpdateEvictable(parent);
  } else {
    table.roots.insert(rec);
  }
  if (bulk_load_) {
    bulk_inserted_.push_back(rec);
  } else {
    UpdateEvictable(rec);
  }
  return absl::OkStatus();
}

void PrefixIndex::EndBulkLoad() {
  bulk_load_ = false;
  // In insertion order: records allocated one after another, so this pass
  // mostly streams through memory.
  for (BlockRecord* rec : bulk_inserted_) UpdateEvictable(rec);
  bulk_inserted_.clear();
  bulk_inserted_.shrink_to_fit();
}

std::unique_ptr<BlockRecord> PrefixIndex::Remove(BlockRecord* record) {
  if (!record->indexed) Die("Remove of a block that is not indexed");
  if (record->first_child != nullptr) Die("Remove of a block with cached children");
  if (bulk_load_) Die("Remove during a bulk load");
  auto table = tables_.find(record->ns);
  if (table == tables_.end()) Die("Remove of a block of an unknown namespace");
  auto& blocks = table->second.blocks;
  std::unique_ptr<BlockRecord> owned = blocks.Extract(record);
  if (owned == nullptr) Die("Remove of an unknown block");
  --size_;
  record->indexed = false;
  UpdateEvictable(record);
  if (BlockRecord* parent = record->parent; parent != nullptr) {
    if (record->prev_sibling != nullptr) {
      record->prev_sibling->next_sibling = record->next_sibling;
    } else {
      parent->first_child = record->next_sibling;
    }
    if (record->next_sibling != nullptr) record->next_sibling->prev_sibling = record->prev_sibling;
    record->next_sibling = record->prev_sibling = nullptr;
    record->parent = nullptr;
    UpdateEvictable(parent);
  } else {
    table->second.roots.erase(record);
  }
  if (blocks.empty()) tables_.erase(table);
  return owned;
}

void PrefixIndex::ReleaseUnusedRoom() {
  for (auto it = tables_.begin(); it != tables_.end();) {
    auto& blocks = it->second.blocks;
    if (blocks.empty()) {
      tables_.erase(it++);
      continue;
    }
    // rehash(0) sizes the table for its blocks: done where it is at least
    // four times larger than they need.
    if (blocks.size() < blocks.capacity() / 4) blocks.ShrinkToFit();
    ++it;
  }
}

std::vector<BlockRecord*> PrefixIndex::Roots(const NamespaceId& ns) const {
  auto it = tables_.find(ns);
  if (it == tables_.end()) return {};
  const auto& roots = it->second.roots;
  return std::vector<BlockRecord*>(roots.begin(), roots.end());
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
    for (BlockRecord* child : rec->children()) stack.push_back({child, false});
  }
  return out;
}

void PrefixIndex::RefilePending() const {
  if (pending_refiles_.empty()) return;
  // Oldest touch first: blocks priced alike keep their recency order.
  std::sort(
      pending_refiles_.begin(), pending_refiles_.end(),
      [](const BlockRecord* a, const BlockRecord* b) { return a->last_access < b->last_access; });
  for (BlockRecord* rec : pending_refiles_) Refile(rec);
  pending_refiles_.clear();
}

void PrefixIndex::Refile(BlockRecord* record) const {
  // Queued blocks stay in the same sets and host class (any change of
  // either goes through SetCandidates, which refiles first).
  record->clock_at_use = policy_clock_;
  record->refile_pending = false;
  if (record->candidate_of == 0) return;
  const FiledKey old{record->priority, record->filed_at};
  const uint64_t now = record->last_access;
  record->priority = policy_->Priority(*record);
  const FiledKey key{record->priority, now};
  auto move = [&](CandidateSet& set) {
    set.erase(old);
    set.emplace(key, record);
  };
  for (int k = 0; k < kNumCandidates; ++k) {
    if (((record->candidate_of >> k) & 1) == 0) continue;
    move(sets_[k]);
    move(by_class_[k][record->candidate_class]);
  }
  record->filed_at = now;
  record->refile_pending = false;
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
  RefilePending();
  if (host_class.has_value() && kind != kNvmeOnlyLeaf) {  // NVMe-only blocks have no host class
    const auto& per_class = by_class_[kind];
    if (*host_class >= per_class.size()) return nullptr;
    const auto& set = per_class[*host_class];
    return set.empty() ? nullptr : set.begin()->second;
  }
  return sets_[kind].empty() ? nullptr : sets_[kind].begin()->second;
}

void PrefixIndex::NoteReclaimed(BlockRecord* record, bool dropped) {
  // Blocks used before this reclamation are priced before it moves the
  // policy (an inflation level): as if priced at their use.
  RefilePending();
  // A tier may reclaim a block that is not the lowest of its sets (the
  // coldest of one size class, every block of a slab): the policy sees the
  // lowest priority of the sets the block is in, never more.
  double floor = record->priority;
  for (int k = 0; k < kNumCandidates; ++k) {
    if (((record->candidate_of >> k) & 1) != 0 && !sets_[k].empty()) {
      floor = std::min(floor, sets_[k].begin()->first.first);
    }
  }
  policy_->OnReclaim(*record, floor, dropped, size_);
  policy_clock_ = policy_->clock();
}

uint64_t PrefixIndex::CountStranded(uint64_t* bytes) const {
  uint64_t stranded = 0, stranded_bytes = 0;
  for (const auto& entry : tables_) {
    // A named reference, not a structured binding: clang 14 cannot capture
    // structured bindings in a lambda.
    const auto& blocks = entry.second.blocks;
    blocks.ForEach([&](const BlockRecord& rec) {
      if (rec.parent != nullptr && blocks.Find(rec.parent->key) != rec.parent) {
        ++stranded;
        stranded_bytes += rec.size;
      }
    });
  }
  if (bytes != nullptr) *bytes = stranded_bytes;
  return stranded;
}

void PrefixIndex::UpdateEvictable(BlockRecord* record) {
  uint8_t want = 0;
  if (record->indexed && !record->pinned()) {
    const bool leaf = record->first_child == nullptr;
    if (record->in_host && !record->on_nvme && leaf) want |= 1 << kHostOnlyLeaf;
    if (record->in_host && record->on_nvme) want |= 1 << kHostCopy;
    if (!record->in_host && record->on_nvme && leaf) want |= 1 << kNvmeOnlyLeaf;
  }
  SetCandidates(record, want);
}

void PrefixIndex::SetCandidates(BlockRecord* record, uint8_t want) {
  // A queued block may be leaving the sets for good (and then be freed):
  // empty the queue first, which also keeps the queue's blocks in the sets
  // they were queued in.
  if (record->refile_pending) RefilePending();
  // Leave every set under the class the record was filed with, then join the
  // wanted ones under its current class, priced for its last use.
  const FiledKey old{record->priority, record->filed_at};
  for (int k = 0; k < kNumCandidates; ++k) {
    if ((record->candidate_of >> k) & 1) {
      sets_[k].erase(old);
      by_class_[k][record->candidate_class].erase(old);
    }
  }
  if (want != 0) record->priority = policy_->Priority(*record);
  const FiledKey key{record->priority, record->last_access};
  const uint32_t cls = record->slot.size_class;
  for (int k = 0; k < kNumCandidates; ++k) {
    if ((want >> k) & 1) {
      sets_[k].emplace(key, record);
      if (by_class_[k].size() <= cls) by_class_[k].resize(cls + 1);
      by_class_[k][cls].emplace(key, record);
    }
  }
  record->candidate_of = want;
  record->candidate_class = static_cast<uint8_t>(cls);
  record->filed_at = record->last_access;
}

}  // namespace kvtier
