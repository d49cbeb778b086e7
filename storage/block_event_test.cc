// BlockCache's residency events (storage/block_event.h): replaying them
// gives the cache's contents, whatever changed it.
#include "storage/block_event.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/block_cache_test_fixture.h"
#include "testing/block_event_mirror.h"

namespace kvtier {
namespace {

using block_cache_test::BlockCacheTest;
using block_cache_test::kKiB;

class BlockEventTest : public BlockCacheTest {
 protected:
  void SetUp() override {
    BlockCacheTest::SetUp();
    cache_->SetEventSink(&mirror_);
  }
  void TearDown() override { cache_->SetEventSink(nullptr); }

  void ExpectMirrorIsContents() {
    EXPECT_EQ(mirror_.errors(), std::vector<std::string>());
    EXPECT_EQ(mirror_.contents(), SnapshotContents(*cache_));
  }

  BlockEventMirror mirror_;
};

TEST_F(BlockEventTest, PutsEvictionsDeletesAndCloseAreReported) {
  ASSERT_TRUE(Put(ns_, {"a", "b", "c"}).ok());
  EXPECT_EQ(mirror_.stored(Medium::kHost), 3u);
  ExpectMirrorIsContents();
  // A repeated Put stores nothing new and reports nothing.
  ASSERT_TRUE(Put(ns_, {"a", "b"}).ok());
  EXPECT_EQ(mirror_.events(), 3u);

  // 8 MiB of 64 KiB blocks: 200 more force evictions.
  for (int c = 0; c < 20; ++c) {
    std::vector<std::string> chain;
    for (int i = 0; i < 10; ++i) chain.push_back(absl::StrCat("c", c, "-", i));
    ASSERT_TRUE(Put(ns_, chain).ok());
  }
  EXPECT_GT(mirror_.removed(Medium::kHost), 0u);
  EXPECT_GT(cache_->Snapshot().counters.evictions, 0u);
  ExpectMirrorIsContents();

  // Delete, operator eviction, another namespace, a dropping close.
  ASSERT_TRUE(cache_->Delete(ns_, Keys({"c19-8"}), /*recursive=*/true).ok());
  ExpectMirrorIsContents();
  cache_->Evict(ns_, 5);
  ExpectMirrorIsContents();
  const NamespaceId other = OpenNs("model-b", "");
  ASSERT_TRUE(Put(other, {"x", "y"}).ok());
  ASSERT_TRUE(cache_->CloseNamespace(ns_, /*drop_blocks=*/true).ok());
  ExpectMirrorIsContents();
  const auto left = mirror_.contents();
  ASSERT_EQ(left.size(), 2u);
  for (const auto& [ns, key, medium] : left) EXPECT_EQ(ns, other.ToHex());
}

TEST_F(BlockEventTest, CorruptBlockDroppedWithDescendantsIsReported) {
  ASSERT_TRUE(Put(ns_, {"a", "b", "c"}).ok());
  absl::StatusOr<absl::Span<uint8_t>> bytes = cache_->MutableBytesForTesting(ns_, Key("b"));
  ASSERT_TRUE(bytes.ok());
  (*bytes)[7] ^= 0xff;
  EXPECT_FALSE(cache_->Read(ns_, Keys({"a", "b"})).ok());
  ExpectMirrorIsContents();
  EXPECT_EQ(mirror_.contents().size(), 1u);  // only a is left
  EXPECT_EQ(mirror_.removed(Medium::kHost), 2u);
}

TEST_F(BlockEventTest, SnapshotListsParentsFirstAndThenRunsItsCallbackLocked) {
  ASSERT_TRUE(Put(ns_, {"r", "s", "t"}).ok());
  ASSERT_TRUE(Put(ns_, {"u"}, "s").ok());
  ASSERT_TRUE(Put(ns_, {"v", "w"}).ok());
  BlockEventMirror fresh;  // records a child seen before its parent as an error
  bool ran = false;
  cache_->SnapshotInto(&fresh, [&] { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_EQ(fresh.errors(), std::vector<std::string>());
  EXPECT_EQ(fresh.contents().size(), 6u);
  EXPECT_EQ(fresh.contents(), mirror_.contents());
}

TEST_F(BlockEventTest, NoSinkNoReports) {
  cache_->SetEventSink(nullptr);
  ASSERT_TRUE(Put(ns_, {"a", "b"}).ok());
  EXPECT_EQ(mirror_.events(), 0u);
  EXPECT_EQ(SnapshotContents(*cache_).size(), 2u);
}

}  // namespace
}  // namespace kvtier
