// BlockCache::PutBatch: the blocks of one Put, staged in host slots this
// batch reserves (and alone writes) until Commit indexes them all at once;
// landings (StartLanding) are slots another party fills, trusted only once
// KeepVerifiedPrefix has checked them, and the slots of dropped landings are
// held until the batch is destroyed. See block_cache.h for the contract.
// Takes BlockCache's mutex only to reserve, commit and release.
#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/checksum.h"
#include "base/hashed_copy.h"
#include "base/sigbus_guard.h"
#include "base/status_macros.h"
#include "spdlog/spdlog.h"
#include "storage/block_cache.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<BlockCache::PutBatch>> BlockCache::BeginPut(
    const NamespaceId& ns, DeferredSweep* judged_with) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto* entry, namespaces_.FindOpen(ns));
  std::vector<PutBatch::Target> targets;
  const bool hybrid = entry->spec.hybrid();
  if (!hybrid) {
    targets.push_back({ns, entry->block_bytes, true});
  } else {
    for (uint32_t g = 0; g < entry->spec.groups.size(); ++g) {
      const NamespaceId storage = NamespaceId::OfGroup(ns, g);
      const NamespaceEntry* group = namespaces_.FindAny(storage);
      targets.push_back(
          {storage, group->block_bytes, entry->spec.groups[g].kind == GroupKind::kFullAttention});
    }
  }
  return std::unique_ptr<PutBatch>(
      new PutBatch(this, ns, entry->block_bytes, entry->spec.tenant, std::move(targets), hybrid,
                   judged_with != nullptr && judged_with->ns_ == ns ? judged_with : nullptr));
}

BlockCache::PutBatch::~PutBatch() {
  if (done_ && held_.empty()) return;
  MutexLock lock(&cache_->mu_);
  if (!done_) ReleaseLocked();
  for (const SlabAllocator::Slot& slot : held_) cache_->host_.Free(slot);
}

void BlockCache::PutBatch::ReleaseLocked() {
  for (Staged& s : staged_) {
    if (s.slot.has_value()) cache_->host_.Free(*s.slot);
  }
  staged_.clear();
  for (BlockRecord* rec : pinned_) cache_->host_.Unpin(rec);
  pinned_.clear();
  cache_->quotas_.RefundReservation(tenant_, reserved_bytes_);
  reserved_bytes_ = 0;
  done_ = true;
}

absl::Status BlockCache::PutBatch::Fail(absl::Status status) {
  dead_ = true;
  return status;
}

absl::Status BlockCache::PutBatch::StartBlock(const BlockKey& key, const BlockKey& parent,
                                              uint64_t size, uint32_t group) {
  absl::Status st = Reserve(key, parent, size, group);
  if (!st.ok()) dead_ = true;
  return st;
}

absl::Status BlockCache::PutBatch::Reserve(const BlockKey& key, const BlockKey& given_parent,
                                           uint64_t size, uint32_t group) {
  if (dead_ || done_) return absl::FailedPreconditionError("put batch already ended");
  if (group >= targets_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("block ", key.ToHex(), " names group ", group,
                                                   "; the namespace has ", targets_.size(),
                                                   hybrid_ ? " groups" : " (it has no groups)"));
  }
  const Target& target = targets_[group];
  // Window blocks and snapshots stand alone: their place is their key's.
  const BlockKey parent = target.chained ? given_parent : BlockKey();
  if (!staged_.empty() && !staged_.back().filling && staged_.back().filled != staged_.back().size) {
    const Staged& prev = staged_.back();
    return absl::InvalidArgumentError(absl::StrCat("block ", prev.key.ToHex(), " ended after ",
                                                   prev.filled, " of its ", prev.size, " bytes"));
  }
  if (size == 0 || size > target.block_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", key.ToHex(), " declares ", size, " bytes; blocks in this ",
                     hybrid_ ? absl::StrCat("group (", group, ")") : std::string("namespace"),
                     " are 1..", target.block_bytes, " bytes"));
  }
  if (key == parent) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", key.ToHex(), " names itself as its parent"));
  }
  if (staged_index_.contains({group, key})) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", key.ToHex(), " appears twice in one Put"));
  }
  MutexLock lock(&cache_->mu_);
  PrefixIndex& index = cache_->index_;
  auto pin = [&](BlockRecord* rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(cache_->mu_) {
    if (std::find(pinned_.begin(), pinned_.end(), rec) != pinned_.end()) return;
    index.AddRef(rec);
    pinned_.push_back(rec);
  };
  // A second full-attention group follows the first one's chain: its
  // block under a key must have that group's parent for the key.
  if (hybrid_ && target.chained && group != spine_) {
    std::optional<BlockKey> spine_parent;
    if (auto it = staged_index_.find({spine_, key}); it != staged_index_.end()) {
      spine_parent = staged_[it->second].parent;
    } else if (BlockRecord* s = index.Find(targets_[spine_].storage, key); s != nullptr) {
      spine_parent = s->parent_key();
    }
    if (!spine_parent.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "block ", key.ToHex(), " of group ", group, ": store group ", spine_,
          "'s block of this key first (or earlier in this Put); the full-attention groups share "
          "its chain"));
    }
    if (!(*spine_parent == parent)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "block ", key.ToHex(), " of group ", group, " names parent '", parent.ToHex(),
          "', but group ", spine_, " has '", spine_parent->ToHex(), "' for this key"));
    }
  }
  if (!parent.empty() && !staged_index_.contains({group, parent})) {
    BlockRecord* p = index.Find(target.storage, parent);
    if (p == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("parent ", parent.ToHex(), " of block ", key.ToHex(),
                       " is not cached and not earlier in this Put"));
    }
    pin(p);
  }
  Staged staged{group, key, parent, size, 0, std::nullopt, 0};
  if (BlockRecord* existing = index.Find(target.storage, key); existing != nullptr) {
    if (const BlockKey cached = existing->parent_key(); cached != parent) {
      return absl::AlreadyExistsError(absl::StrCat("block ", key.ToHex(),
                                                   " is cached with parent '", cached.ToHex(),
                                                   "', not '", parent.ToHex(), "'"));
    }
    if (existing->size != size) {
      return absl::AlreadyExistsError(absl::StrCat("block ", key.ToHex(), " is cached with ",
                                                   existing->size, " bytes, not ", size));
    }
    pin(existing);
  } else {
    // The tenant's share first: a tenant whose open writes hold its share
    // of the tier is refused before it can evict anyone's blocks.
    RETURN_IF_ERROR(cache_->quotas_.ChargeReservation(tenant_, size));
    absl::StatusOr<SlabAllocator::Slot> slot = cache_->AllocateLocked(size);
    if (!slot.ok()) {
      cache_->quotas_.RefundReservation(tenant_, size);
      return slot.status();
    }
    reserved_bytes_ += size;
    staged.slot = *slot;
  }
  staged_index_.emplace(std::make_pair(group, key), staged_.size());
  staged_.push_back(staged);
  hasher_.Reset();
  return absl::OkStatus();
}

absl::Status BlockCache::PutBatch::CheckAppend(uint64_t bytes) {
  if (dead_ || done_) return absl::FailedPreconditionError("put batch already ended");
  if (staged_.empty()) {
    return Fail(absl::InvalidArgumentError("data arrived before any block was named"));
  }
  const Staged& s = staged_.back();
  if (s.filling) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("block ", s.key.ToHex(), " is filled in place (StartFill), not appended")));
  }
  if (bytes > s.size - s.filled) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("chunk of ", bytes, " bytes overruns block ", s.key.ToHex(), " (", s.filled,
                     " of ", s.size, " bytes already received)")));
  }
  return absl::OkStatus();
}

absl::Status BlockCache::PutBatch::Append(absl::Span<const absl::string_view> pieces) {
  uint64_t bytes = 0;
  for (absl::string_view p : pieces) bytes += p.size();
  RETURN_IF_ERROR(CheckAppend(bytes));
  for (absl::string_view p : pieces) {
    RETURN_IF_ERROR(Append({reinterpret_cast<const uint8_t*>(p.data()), p.size()}));
  }
  return absl::OkStatus();
}

absl::Status BlockCache::PutBatch::Append(absl::Span<const uint8_t> data,
                                          absl::Span<const uint8_t> may_vanish) {
  RETURN_IF_ERROR(CheckAppend(data.size()));
  Staged& s = staged_.back();
  if (s.slot.has_value()) {
    // The slot belongs to this batch alone until Commit: no lock needed. Copy
    // and hash in cache-sized pieces, hashing the copy: one pass over memory,
    // and the checksum describes the bytes stored even if the source changes
    // (base/hashed_copy.h).
    uint8_t* dst = cache_->SlotData(*s.slot) + s.filled;
    for (size_t done = 0; done < data.size(); done += kCopyChunk) {
      const size_t n = std::min(kCopyChunk, data.size() - done);
      if (may_vanish.empty()) {
        CopyAndHash(dst + done, data.data() + done, n, hasher_);
      } else if (!GuardedCopyAndHash(dst + done, data.data() + done, n, hasher_, may_vanish.data(),
                                     may_vanish.size())) {
        hasher_.Reset();
        return Fail(VanishedMemoryError(absl::StrCat("block ", s.key.ToHex())));
      }
    }
  }
  s.filled += data.size();
  if (s.filled == s.size && s.slot.has_value()) s.checksum = hasher_.Digest();
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<uint8_t>> BlockCache::PutBatch::StartLanding(
    const BlockKey& key, const BlockKey& parent, uint64_t size, uint64_t checksum, uint32_t group) {
  if (dead_ || done_) return absl::FailedPreconditionError("put batch already ended");
  // A refused landing leaves the batch usable: the blocks before it can
  // still be received and committed.
  RETURN_IF_ERROR(Reserve(key, parent, size, group));
  Staged& s = staged_.back();
  s.filled = s.size;
  s.landing = true;
  if (!s.slot.has_value()) return absl::Span<uint8_t>();
  s.checksum = checksum;
  return absl::Span<uint8_t>(cache_->SlotData(*s.slot), s.size);
}

absl::StatusOr<absl::Span<uint8_t>> BlockCache::PutBatch::StartFill(const BlockKey& key,
                                                                    const BlockKey& parent,
                                                                    uint64_t size, uint32_t group) {
  if (absl::Status st = Reserve(key, parent, size, group); !st.ok()) return Fail(st);
  Staged& s = staged_.back();
  s.filling = true;
  if (!s.slot.has_value()) return absl::Span<uint8_t>();
  return absl::Span<uint8_t>(cache_->SlotData(*s.slot), s.size);
}

absl::Status BlockCache::PutBatch::Filled(size_t i, uint64_t checksum) {
  if (dead_ || done_) return absl::FailedPreconditionError("put batch already ended");
  if (i >= staged_.size() || !staged_[i].filling || staged_[i].filled == staged_[i].size) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("block ", i, " of the batch is not awaiting its fill")));
  }
  Staged& s = staged_[i];
  s.filled = s.size;
  if (s.slot.has_value()) s.checksum = checksum;
  return absl::OkStatus();
}

size_t BlockCache::PutBatch::KeepVerifiedPrefix(size_t received) {
  if (dead_ || done_) return 0;
  size_t keep = std::min(received, staged_.size());
  for (size_t i = 0; i < keep; ++i) {
    Staged& s = staged_[i];
    if (!s.landing || !s.slot.has_value()) continue;
    // The slot belongs to this batch alone until Commit: no lock needed.
    const uint64_t got = Checksum64({cache_->SlotData(*s.slot), s.size});
    if (got != s.checksum) {
      spdlog::warn(
          "received block {} does not match its checksum; it and the {} after it are "
          "not stored",
          s.key.ToHex(), staged_.size() - i - 1);
      keep = i;
      break;
    }
    s.verified = true;
  }
  for (size_t i = keep; i < staged_.size(); ++i) {
    if (staged_[i].slot.has_value()) held_.push_back(*staged_[i].slot);
    staged_index_.erase({staged_[i].group, staged_[i].key});
  }
  staged_.resize(keep);
  return keep;
}

absl::StatusOr<PutResult> BlockCache::PutBatch::Commit() {
  if (dead_ || done_) return absl::FailedPreconditionError("put batch already ended");
  if (staged_.empty()) return Fail(absl::InvalidArgumentError("Put carried no blocks"));
  if (staged_.back().filled != staged_.back().size) {
    const Staged& last = staged_.back();
    return Fail(
        absl::InvalidArgumentError(absl::StrCat("stream ended after ", last.filled, " of the ",
                                                last.size, " bytes of block ", last.key.ToHex())));
  }
  for (const Staged& s : staged_) {
    if (s.filling && s.filled != s.size) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("block ", s.key.ToHex(), " was never filled (StartFill without Filled)")));
    }
    if (s.landing && s.slot.has_value() && !s.verified) {
      return Fail(absl::FailedPreconditionError(
          absl::StrCat("block ", s.key.ToHex(), " landed but was not verified")));
    }
  }
  MutexLock lock(&cache_->mu_);
  PrefixIndex& index = cache_->index_;
  if (!cache_->namespaces_.FindOpen(ns_).ok()) {
    return Fail(
        absl::AbortedError(absl::StrCat("namespace ", ns_.ToHex(), " was closed during the Put")));
  }
  // Validate everything first: the batch lands whole or not at all.
  std::vector<bool> skip(staged_.size(), false);
  for (size_t i = 0; i < staged_.size(); ++i) {
    const Staged& s = staged_[i];
    const NamespaceId& storage = targets_[s.group].storage;
    BlockRecord* now = index.Find(storage, s.key);
    if (!s.slot.has_value() && now == nullptr) {
      return Fail(absl::AbortedError(
          absl::StrCat("cached block ", s.key.ToHex(), " was dropped during the Put; retry")));
    }
    if (s.slot.has_value() && now != nullptr) {
      if (now->parent_key() != s.parent) {
        return Fail(absl::AbortedError(
            absl::StrCat("block ", s.key.ToHex(), " was stored concurrently with another parent")));
      }
      skip[i] = true;  // a concurrent Put stored the same block first
    }
    if (!s.parent.empty() && !staged_index_.contains({s.group, s.parent}) &&
        index.Find(storage, s.parent) == nullptr) {
      return Fail(absl::AbortedError(
          absl::StrCat("parent ", s.parent.ToHex(), " was dropped during the Put; retry")));
    }
  }
  PutResult result;
  std::vector<std::pair<uint64_t, uint64_t>> per_group(targets_.size());  // blocks, bytes
  std::vector<BlockKey> committed;
  std::vector<float> values(targets_.size());
  for (size_t g = 0; g < targets_.size(); ++g) {
    const NamespaceEntry* e = cache_->namespaces_.FindAny(targets_[g].storage);
    values[g] = e == nullptr ? 0.0f : static_cast<float>(e->retention_value);
  }
  for (size_t i = 0; i < staged_.size(); ++i) {
    Staged& s = staged_[i];
    if (!s.slot.has_value() || skip[i]) {
      ++result.blocks_already_cached;
      continue;
    }
    // A partial last block: shorter than its parent, earlier in the batch
    // or cached (an engine's full blocks are all alike; a root is never
    // judged partial).
    bool partial_tail = false;
    if (!hybrid_ && i + 1 == staged_.size() && !s.parent.empty()) {
      if (i > 0 && staged_[i - 1].key == s.parent) {
        partial_tail = s.size < staged_[i - 1].size;
      } else if (const BlockRecord* p = index.Find(targets_[s.group].storage, s.parent)) {
        partial_tail = s.size < p->size;
      }
    }
    auto rec = std::make_unique<BlockRecord>();
    rec->value = values[s.group];
    rec->retention = retention_.has_value() ? std::min(*retention_, kMaxRetention)
                     : partial_tail         ? kMinRetention
                                            : kDefaultRetention;
    rec->ns = targets_[s.group].storage;
    rec->key = s.key;
    rec->size = s.size;
    rec->checksum = s.checksum;
    rec->slot = *s.slot;
    rec->uses = 1;
    const BlockRecord& stored = *rec;
    if (absl::Status st = index.Insert(std::move(rec), s.parent); !st.ok()) {
      // Unreachable after validation; a failure here is a bug, not bad input.
      spdlog::critical("Put commit: {}", st.ToString());
      std::abort();
    }
    cache_->host_.NoteStored(stored, Medium::kHost);
    s.slot.reset();  // now owned by the index
    ++result.blocks_stored;
    result.bytes_stored += s.size;
    per_group[s.group].first += 1;
    per_group[s.group].second += s.size;
    if (hybrid_) committed.push_back(s.key);
  }
  for (size_t g = 0; g < targets_.size(); ++g) {
    if (per_group[g].first == 0) continue;
    cache_->namespaces_.AddBlocks(cache_->namespaces_.FindAny(targets_[g].storage),
                                  per_group[g].first, per_group[g].second);
  }
  cache_->host_.AddBlocks(result.blocks_stored, result.bytes_stored);
  cache_->counters_.blocks_put += result.blocks_stored;
  cache_->counters_.bytes_put += result.bytes_stored;
  ReleaseLocked();
  if (hybrid_ && judged_with_ != nullptr) {
    // Judged with the rest of its request, when that ends.
    judged_with_->committed_.insert(judged_with_->committed_.end(), committed.begin(),
                                    committed.end());
  } else if (hybrid_) {
    // What the batch stored that no cut can use goes now (its pins are gone).
    result.blocks_unusable = static_cast<uint32_t>(cache_->groups_.AfterCommit(ns_, committed));
    cache_->SweepGroupsLocked();
  }
  return result;
}

}  // namespace kvtier
