// Test-only: HostTierFixture, the fixture base of the unit tests of the
// externally synchronized pieces BlockCache wires around its HostTier
// (HostTier itself, ReadPath, the NVMe Mover): the PrefixIndex,
// NamespaceTable and CacheCounters they share, a HostTier over them, one
// open namespace of 64 KiB blocks, and Store, which puts a block in the host
// tier as a committed Put leaves it. Each test adds its own pieces on top.
// block_cache_nvme_test.cc takes only Key and SpecWith64KiBBlocks.
#ifndef KVTIER_TESTING_HOST_TIER_FIXTURE_H_
#define KVTIER_TESTING_HOST_TIER_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/checksum.h"
#include "base/status_macros.h"
#include "storage/block_key.h"
#include "storage/cache_stats.h"
#include "storage/host_arena.h"
#include "storage/host_tier.h"
#include "storage/namespace_spec.h"
#include "storage/namespace_table.h"
#include "storage/prefix_index.h"
#include "storage/slab_allocator.h"
#include "storage/tenant_quotas.h"

namespace kvtier {

// The block size of SpecWith64KiBBlocks's namespaces, and of every Store.
inline constexpr uint64_t kBlock = 64 * 1024;

inline BlockKey Key(const std::string& k) { return *BlockKey::Create(k); }

// A namespace of 64 KiB blocks: 2 * 1 layer * 1 head * 128 dim * 128 tokens * 2 bytes.
inline NamespaceSpec SpecWith64KiBBlocks(const std::string& model_id) {
  NamespaceSpec s;
  s.model_id = model_id;
  s.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};
  return s;
}

class HostTierFixture : public ::testing::Test {
 protected:
  // The tenant may open 4 namespaces, hold 4 leases and reserve
  // `max_reserved_bytes`.
  explicit HostTierFixture(uint64_t max_reserved_bytes = 4 * kBlock)
      : quotas_(TenantLimits{
            .max_namespaces = 4, .max_leases = 4, .max_reserved_bytes = max_reserved_bytes}) {}

  // Makes host_ over an arena of `host_bytes` carved in slabs of `slab_bytes`,
  // without an NVMe tier (a test may build one over host_->arena() and
  // set_nvme it before using host_), and opens `spec` as ns_.
  absl::Status MakeHostTier(uint64_t host_bytes, uint64_t slab_bytes, const NamespaceSpec& spec) {
    ASSIGN_OR_RETURN(std::unique_ptr<SlabAllocator> allocator,
                     SlabAllocator::Create(host_bytes, slab_bytes));
    ASSIGN_OR_RETURN(std::unique_ptr<HostArena> arena, HostArena::Create(allocator->capacity()));
    host_ = std::make_unique<HostTier>(std::move(arena), std::move(allocator), &index_,
                                       &namespaces_, &counters_);
    ns_ = NamespaceId::Of(spec);
    return namespaces_.Open(ns_, spec, kBlock).status();
  }

  // Stores a kBlock block of ns_ in a host slot, as a committed Put leaves
  // it: every byte is key[0], its checksum is set, it has one use, and the
  // index, namespace and tier count it. `parent` empty: a chain's first.
  BlockRecord* Store(const std::string& key, const std::string& parent = "") {
    absl::StatusOr<SlabAllocator::Slot> slot = host_->Allocate(kBlock);
    EXPECT_TRUE(slot.ok()) << slot.status();
    std::memset(host_->SlotData(*slot), key[0], kBlock);
    auto rec = std::make_unique<BlockRecord>();
    rec->ns = ns_;
    rec->key = Key(key);
    rec->size = kBlock;
    rec->slot = *slot;
    rec->checksum = Checksum64({host_->SlotData(*slot), kBlock});
    rec->uses = 1;
    EXPECT_TRUE(index_.Insert(std::move(rec), parent.empty() ? BlockKey() : Key(parent)).ok());
    namespaces_.AddBlocks(*namespaces_.FindOpen(ns_), 1, kBlock);
    host_->AddBlocks(1, kBlock);
    return index_.Find(ns_, Key(key));
  }

  PrefixIndex index_;
  TenantQuotas quotas_;
  NamespaceTable namespaces_{4, &quotas_};
  CacheCounters counters_;
  std::unique_ptr<HostTier> host_;
  NamespaceId ns_;
};

}  // namespace kvtier

#endif  // KVTIER_TESTING_HOST_TIER_FIXTURE_H_
