#include "storage/record_table.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kvtier {
namespace {

BlockKey Key(int i) { return *BlockKey::Create(absl::StrCat("key-", i)); }

std::unique_ptr<BlockRecord> Rec(int i) {
  auto r = std::make_unique<BlockRecord>();
  r->key = Key(i);
  r->size = static_cast<uint64_t>(i);
  return r;
}

// Tags cut to 1 and 2 bits: nearly every key shares its tag, so the side
// table and the hand-over of a tag's slot carry the load. 64: the default.
class RecordTableTest : public ::testing::TestWithParam<int> {};

TEST_P(RecordTableTest, FindsInsertedKeysAndRefusesDuplicates) {
  RecordTable table(/*seed=*/7, GetParam());
  for (int i = 0; i < 20; ++i) {
    auto rec = Rec(i);
    BlockRecord* raw = rec.get();
    ASSERT_TRUE(table.Insert(rec));
    EXPECT_EQ(rec, nullptr);  // taken
    EXPECT_EQ(table.Find(Key(i)), raw);
  }
  EXPECT_EQ(table.size(), 20u);
  if (GetParam() <= 2) {
    EXPECT_GE(table.side_size(), 16u);  // at most 4 tags hold slots
  }
  auto dup = Rec(5);
  EXPECT_FALSE(table.Insert(dup));
  ASSERT_NE(dup, nullptr);  // left with the caller
  EXPECT_NE(table.Find(Key(5)), dup.get());
  EXPECT_EQ(table.Find(Key(99)), nullptr);
  int seen = 0;
  table.ForEach([&](BlockRecord& r) {
    EXPECT_EQ(table.Find(r.key), &r);
    ++seen;
  });
  EXPECT_EQ(seen, 20);
}

TEST_P(RecordTableTest, ExtractingATagsHolderHandsTheSlotOn) {
  RecordTable table(/*seed=*/7, GetParam());
  std::vector<BlockRecord*> raw;
  for (int i = 0; i < 12; ++i) {
    auto rec = Rec(i);
    raw.push_back(rec.get());
    ASSERT_TRUE(table.Insert(rec));
  }
  // Removed in insertion order: the first records of each tag hold the
  // slots, so every removal of a holder must promote a side record.
  for (int i = 0; i < 12; ++i) {
    std::unique_ptr<BlockRecord> owned = table.Extract(raw[i]);
    ASSERT_EQ(owned.get(), raw[i]);
    EXPECT_EQ(table.Find(Key(i)), nullptr);
    EXPECT_EQ(table.Extract(raw[i]), nullptr);  // not here any more
    for (int j = i + 1; j < 12; ++j) ASSERT_EQ(table.Find(Key(j)), raw[j]) << i << " " << j;
    std::vector<BlockKey> rest;
    for (int j = i + 1; j < 12; ++j) rest.push_back(Key(j));
    std::vector<BlockRecord*> run;
    EXPECT_EQ(table.FindRun(rest, &run), rest.size());
    EXPECT_EQ(run, std::vector<BlockRecord*>(raw.begin() + i + 1, raw.end()));
  }
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.side_size(), 0u);
}

TEST_P(RecordTableTest, FindRunStopsAtTheFirstKeyNotHere) {
  RecordTable table(/*seed=*/3, GetParam());
  std::vector<BlockRecord*> raw;
  for (int i = 0; i < 40; ++i) {
    auto rec = Rec(i);
    raw.push_back(rec.get());
    ASSERT_TRUE(table.Insert(rec));
  }
  std::vector<BlockKey> keys;
  for (int i = 0; i < 40; ++i) keys.push_back(Key(i));
  std::vector<BlockRecord*> out = {nullptr};  // appended to, not replaced
  EXPECT_EQ(table.FindRun(keys, &out), 40u);
  ASSERT_EQ(out.size(), 41u);
  EXPECT_EQ(out[0], nullptr);
  EXPECT_EQ(std::vector<BlockRecord*>(out.begin() + 1, out.end()), raw);
  // A missing key late in the walk (past its prefetch distance), and one
  // whose tag is held by another key (with 1-bit tags, every tag is held).
  for (int cut : {0, 1, 9, 25, 39}) {
    std::vector<BlockKey> k = keys;
    k[cut] = Key(1000 + cut);
    out.clear();
    EXPECT_EQ(table.FindRun(k, &out), static_cast<size_t>(cut)) << cut;
    EXPECT_EQ(out, std::vector<BlockRecord*>(raw.begin(), raw.begin() + cut));
  }
  out.clear();
  EXPECT_EQ(table.FindRun({}, &out), 0u);
}

// Random inserts, duplicate inserts and extracts against a std::map model:
// the table finds exactly the model's records, and FindRun agrees with Find.
TEST_P(RecordTableTest, AgreesWithAModelUnderRandomOperations) {
  RecordTable table(/*seed=*/11, GetParam());
  std::map<int, BlockRecord*> model;
  std::mt19937 rng(GetParam());
  for (int step = 0; step < 4000; ++step) {
    const int k = static_cast<int>(rng() % 64);
    if (rng() % 3 != 0) {
      auto rec = Rec(k);
      BlockRecord* raw = rec.get();
      const bool fresh = !model.contains(k);
      ASSERT_EQ(table.Insert(rec), fresh) << step;
      if (fresh) model[k] = raw;
    } else if (auto it = model.find(k); it != model.end()) {
      ASSERT_EQ(table.Extract(it->second).get(), it->second) << step;
      model.erase(it);
    }
    ASSERT_EQ(table.size(), model.size());
    if (step % 100 == 0) {
      std::vector<BlockKey> keys;
      std::vector<BlockRecord*> want;
      for (int i = 0; i < 64; ++i) {
        auto it = model.find(i);
        ASSERT_EQ(table.Find(Key(i)), it == model.end() ? nullptr : it->second) << step;
        keys.push_back(Key(i));
        if (want.size() == static_cast<size_t>(i) && it != model.end()) want.push_back(it->second);
      }
      std::vector<BlockRecord*> run;
      EXPECT_EQ(table.FindRun(keys, &run), want.size());
      EXPECT_EQ(run, want) << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TagBits, RecordTableTest, ::testing::Values(1, 2, 64));

}  // namespace
}  // namespace kvtier
