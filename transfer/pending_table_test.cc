// PendingTable on its own: the cap on stages plus exports, taking entries
// once, expiry at exactly each entry's time, quarantine release.
#include "transfer/pending_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "base/clock.h"
#include "storage/block_cache.h"

namespace kvtier {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

std::unique_ptr<StageEntry> Stage(absl::Time expiry) {
  auto e = std::make_unique<StageEntry>();
  e->expiry = expiry;
  return e;
}

std::unique_ptr<ExportEntry> Export(absl::Time expiry) {
  auto e = std::make_unique<ExportEntry>();
  e->expiry = expiry;
  return e;
}

TEST(PendingTableTest, StagesAndExportsShareTheCapAndARefusedEntryComesBack) {
  PendingTable table(2);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_FALSE(table.full());
  EXPECT_EQ(table.AddStage("s1", Stage(kT0)), nullptr);
  EXPECT_EQ(table.AddExport("e1", Export(kT0)), nullptr);
  EXPECT_TRUE(table.full());
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.stages(), 1u);
  EXPECT_EQ(table.exports(), 1u);

  std::unique_ptr<StageEntry> refused = Stage(kT0 + absl::Seconds(7));
  StageEntry* const refused_raw = refused.get();
  std::unique_ptr<StageEntry> back = table.AddStage("s2", std::move(refused));
  EXPECT_EQ(back.get(), refused_raw);
  std::unique_ptr<ExportEntry> back_export = table.AddExport("e2", Export(kT0));
  EXPECT_NE(back_export, nullptr);
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.TakeStage("s2"), nullptr);
}

TEST(PendingTableTest, AnEntryIsTakenOnceAndOnlyByItsKind) {
  PendingTable table(8);
  std::unique_ptr<StageEntry> s = Stage(kT0);
  StageEntry* const s_raw = s.get();
  ASSERT_EQ(table.AddStage("id", std::move(s)), nullptr);
  ASSERT_EQ(table.AddExport("id", Export(kT0)), nullptr);  // ids are per kind
  EXPECT_EQ(table.TakeStage("other"), nullptr);
  std::unique_ptr<StageEntry> taken = table.TakeStage("id");
  EXPECT_EQ(taken.get(), s_raw);
  EXPECT_EQ(table.TakeStage("id"), nullptr);
  EXPECT_EQ(table.stages(), 0u);
  EXPECT_EQ(table.exports(), 1u);
  EXPECT_NE(table.TakeExport("id"), nullptr);
  EXPECT_EQ(table.TakeExport("id"), nullptr);
  EXPECT_EQ(table.size(), 0u);
}

TEST(PendingTableTest, EntriesExpireAtExactlyTheirTimeAndQuarantineEndsOnTime) {
  SystemClock clock;
  BlockCacheOptions o;
  o.host_bytes = 2ull << 20;
  o.slab_bytes = 1ull << 20;
  o.max_block_bytes = 1ull << 20;
  std::unique_ptr<BlockCache> cache = *BlockCache::Create(o, &clock);
  NamespaceSpec spec;
  spec.model_id = "m";
  spec.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};
  const NamespaceId ns = cache->OpenNamespace(spec)->id;
  std::unique_ptr<BlockCache::PutBatch> early = *cache->BeginPut(ns);
  std::unique_ptr<BlockCache::PutBatch> late = *cache->BeginPut(ns);
  BlockCache::PutBatch* const early_raw = early.get();
  BlockCache::PutBatch* const late_raw = late.get();

  PendingTable table(8);
  ASSERT_EQ(table.AddStage("s1", Stage(kT0 + absl::Seconds(1))), nullptr);
  ASSERT_EQ(table.AddStage("s3", Stage(kT0 + absl::Seconds(3))), nullptr);
  ASSERT_EQ(table.AddExport("e2", Export(kT0 + absl::Seconds(2))), nullptr);
  table.Quarantine(kT0 + absl::Seconds(1), std::move(early));
  table.Quarantine(kT0 + absl::Seconds(5), std::move(late));
  EXPECT_EQ(table.quarantined(), 2u);

  PendingTable::Expired x = table.TakeExpired(kT0 + absl::Seconds(1) - absl::Nanoseconds(1));
  EXPECT_TRUE(x.stages.empty());
  EXPECT_TRUE(x.exports.empty());
  EXPECT_TRUE(x.released.empty());

  x = table.TakeExpired(kT0 + absl::Seconds(1));  // at its expiry: expired
  ASSERT_EQ(x.stages.size(), 1u);
  EXPECT_EQ(x.stages[0]->expiry, kT0 + absl::Seconds(1));
  EXPECT_TRUE(x.exports.empty());
  ASSERT_EQ(x.released.size(), 1u);
  EXPECT_EQ(x.released[0].get(), early_raw);
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.quarantined(), 1u);
  EXPECT_NE(table.TakeStage("s3"), nullptr);  // taken before its expiry
  EXPECT_EQ(table.TakeStage("s1"), nullptr);  // gone with the expiry

  x = table.TakeExpired(kT0 + absl::Seconds(4));
  EXPECT_TRUE(x.stages.empty());
  ASSERT_EQ(x.exports.size(), 1u);
  EXPECT_EQ(x.exports[0]->expiry, kT0 + absl::Seconds(2));
  EXPECT_TRUE(x.released.empty());

  x = table.TakeExpired(kT0 + absl::Seconds(5));
  ASSERT_EQ(x.released.size(), 1u);
  EXPECT_EQ(x.released[0].get(), late_raw);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.quarantined(), 0u);
}

TEST(PendingTableTest, ClearDropsEverything) {
  PendingTable table(4);
  ASSERT_EQ(table.AddStage("s", Stage(kT0)), nullptr);
  ASSERT_EQ(table.AddExport("e", Export(kT0)), nullptr);
  table.Clear();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_FALSE(table.full());
  EXPECT_EQ(table.TakeStage("s"), nullptr);
  EXPECT_EQ(table.TakeExport("e"), nullptr);
}

}  // namespace
}  // namespace kvtier
