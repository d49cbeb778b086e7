// TryLookup (block_cache_lookup.cc): a Lookup that never waits for the
// cache's lock.
#include <optional>
#include <thread>

#include "gtest/gtest.h"
#include "storage/block_cache_test_fixture.h"

namespace kvtier {
namespace block_cache_test {
namespace {

// Collects nothing: SnapshotInto needs a sink.
class NullSink final : public BlockEventSink {
 public:
  void OnBlockEvent(const BlockEvent&) override {}
};

TEST_F(BlockCacheTest, TryLookupIsALookupWhenTheLockIsFree) {
  ASSERT_TRUE(Put(ns_, {"a", "b", "c"}).ok());
  absl::StatusOr<std::optional<LookupResult>> r =
      cache_->TryLookup(ns_, "", Keys({"a", "b", "x"}), true, absl::ZeroDuration());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->matched, 2u);
  ASSERT_EQ((*r)->blocks.size(), 2u);
  EXPECT_EQ((*r)->blocks[1].key, Key("b"));
  // The lease it took is a real one.
  ASSERT_FALSE((*r)->lease_id.empty());
  absl::StatusOr<uint32_t> released = cache_->Release((*r)->lease_id, "");
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(*released, 2u);
  // Its hits count as a Lookup's.
  EXPECT_EQ(cache_->Snapshot().counters.lookup_hits, 2u);
}

TEST_F(BlockCacheTest, TryLookupChecksTheTenantAndTheArgumentsAsLookupDoes) {
  ASSERT_TRUE(Put(ns_, {"a"}).ok());
  // ns_ belongs to tenant "": to another it reads as not open.
  EXPECT_EQ(
      cache_->TryLookup(ns_, "other", Keys({"a"}), false, absl::ZeroDuration()).status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->TryLookup(ns_, "", {}, false, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache_->TryLookup(ns_, "", Keys({"a"}), false, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);           // a TTL without a lease
  EXPECT_EQ(cache_->Snapshot().counters.lookup_keys, 0u);  // none of them looked
}

TEST_F(BlockCacheTest, TryLookupDoesNothingWhileAnotherCallHoldsTheLock) {
  ASSERT_TRUE(Put(ns_, {"a", "b"}).ok());
  NullSink sink;
  absl::StatusOr<std::optional<LookupResult>> busy = absl::UnknownError("not run");
  // SnapshotInto runs its `then` under the cache's lock: another thread's
  // TryLookup meanwhile must return at once, empty.
  cache_->SnapshotInto(&sink, [&] {
    std::thread other([&] {
      busy = cache_->TryLookup(ns_, "", Keys({"a", "b"}), true, absl::ZeroDuration());
    });
    other.join();
  });
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_FALSE(busy->has_value());
  const CacheSnapshot snap = cache_->Snapshot();
  EXPECT_EQ(snap.counters.lookup_keys, 0u);  // nothing was looked up
  EXPECT_EQ(snap.active_leases, 0u);         // nor leased
}

}  // namespace
}  // namespace block_cache_test
}  // namespace kvtier
