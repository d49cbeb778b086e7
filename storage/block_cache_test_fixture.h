// The BlockCache test fixture shared by block_cache_test.cc and
// block_cache_limits_test.cc (test-only; compiled into storage_test): a
// cache of 8 MiB in 1 MiB slabs on a fake clock, one namespace of 64 KiB
// blocks, and Put/Lookup helpers whose block bytes are a deterministic
// function of (namespace, key), so any byte can be checked.
#ifndef KVTIER_STORAGE_BLOCK_CACHE_TEST_FIXTURE_H_
#define KVTIER_STORAGE_BLOCK_CACHE_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status_macros.h"
#include "storage/block_cache.h"
#include "testing/host_tier_fixture.h"  // Key
#include "testing/test_bytes.h"

namespace kvtier {
namespace block_cache_test {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

// Block bytes are a deterministic function of (namespace, key): any byte can
// be checked.
inline std::vector<uint8_t> Content(const std::string& tag, const std::string& key, size_t n) {
  return DeterministicBytes(tag + "/" + key, n);
}

class BlockCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(8 * kMiB, 1 * kMiB); }

  void Make(uint64_t host, uint64_t slab) {
    BlockCacheOptions o;
    o.host_bytes = host;
    o.slab_bytes = slab;
    o.max_block_bytes = slab;
    o.default_lease_ttl = absl::Seconds(10);
    o.max_lease_ttl = absl::Seconds(60);
    cache_ = *BlockCache::Create(o, &clock_);
    ns_ = OpenNs("model-a", "");
  }

  // A namespace of 64 KiB blocks: 2 * 1 layer * 1 head * 128 dim * 128 tokens * 2 bytes.
  NamespaceId OpenNs(const std::string& model, const std::string& salt) {
    NamespaceSpec s;
    s.model_id = model;
    s.salt = salt;
    s.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};
    return cache_->OpenNamespace(s)->id;
  }

  absl::Status Put(const NamespaceId& ns, const std::vector<std::string>& chain,
                   const std::string& first_parent = "", size_t size = 64 * kKiB) {
    ASSIGN_OR_RETURN(auto batch, cache_->BeginPut(ns));
    std::string parent = first_parent;
    for (const std::string& k : chain) {
      absl::Status s = batch->StartBlock(Key(k), parent.empty() ? BlockKey() : Key(parent), size);
      if (!s.ok()) return s;
      std::vector<uint8_t> data = Content(ns.ToHex(), k, size);
      // Two chunks, to exercise appends.
      absl::Span<const uint8_t> all(data);
      if (s = batch->Append(all.subspan(0, size / 3)); !s.ok()) return s;
      if (s = batch->Append(all.subspan(size / 3)); !s.ok()) return s;
      parent = k;
    }
    return batch->Commit().status();
  }

  std::vector<BlockKey> Keys(const std::vector<std::string>& ks) {
    std::vector<BlockKey> out;
    for (const auto& k : ks) out.push_back(Key(k));
    return out;
  }

  size_t Matched(const NamespaceId& ns, const std::vector<std::string>& ks) {
    return cache_->Lookup(ns, Keys(ks), false, absl::ZeroDuration())->blocks.size();
  }

  FakeClock clock_;
  std::unique_ptr<BlockCache> cache_;
  NamespaceId ns_;
};

}  // namespace block_cache_test
}  // namespace kvtier

#endif  // KVTIER_STORAGE_BLOCK_CACHE_TEST_FIXTURE_H_
