#include "storage/nvme/catalog.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/slab_allocator.h"

namespace kvtier {
namespace {

NamespaceId Ns(const std::string& model) {
  NamespaceSpec s;
  s.model_id = model;
  s.layout = KvLayout{1, 1, 128, DType::kBf16, 16, 0, 1};
  return NamespaceId::Of(s);
}

CatalogEntry Entry(const NamespaceId& ns, int i) {
  CatalogEntry e;
  e.ns = ns;
  e.key = *BlockKey::Create(absl::StrCat("key-", i));
  if (i > 0) e.parent = *BlockKey::Create(absl::StrCat("key-", i - 1));
  e.device = static_cast<uint32_t>(i % 3);
  e.offset = static_cast<uint64_t>(i) << 20;
  e.size_class = static_cast<uint32_t>(i % 7);
  e.payload_bytes = 1000 + i;
  e.checksum = 0xabcdef00ull + i;
  e.sequence = 100 + i;
  return e;
}

class CatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvtier-catalog-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(CatalogTest, EntriesSurviveReopen) {
  const NamespaceId a = Ns("a"), b = Ns("b");
  {
    auto cat = Catalog::Open(dir_);
    ASSERT_TRUE(cat.ok()) << cat.status();
    for (int i = 0; i < 100; ++i) ASSERT_TRUE((*cat)->Put(Entry(i % 2 ? a : b, i)).ok());
    ASSERT_TRUE((*cat)->Delete(b, Entry(b, 4).key).ok());
  }
  auto cat = Catalog::Open(dir_);
  ASSERT_TRUE(cat.ok()) << cat.status();
  std::map<std::string, CatalogEntry> seen;
  ASSERT_TRUE((*cat)
                  ->ForEach([&](const CatalogEntry& e) {
                    seen[absl::StrCat(e.ns.ToHex(), "/", e.key.bytes())] = e;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(seen.size(), 99u);
  for (int i = 0; i < 100; ++i) {
    const NamespaceId& ns = i % 2 ? a : b;
    const CatalogEntry want = Entry(ns, i);
    auto it = seen.find(absl::StrCat(ns.ToHex(), "/", want.key.bytes()));
    if (i == 4) {
      EXPECT_EQ(it, seen.end());
      continue;
    }
    ASSERT_NE(it, seen.end()) << i;
    const CatalogEntry& got = it->second;
    EXPECT_EQ(got.parent, want.parent);
    EXPECT_EQ(got.device, want.device);
    EXPECT_EQ(got.offset, want.offset);
    EXPECT_EQ(got.size_class, want.size_class);
    EXPECT_EQ(got.payload_bytes, want.payload_bytes);
    EXPECT_EQ(got.checksum, want.checksum);
    EXPECT_EQ(got.sequence, want.sequence);
  }
}

TEST_F(CatalogTest, PutBatchCommitsEveryEntry) {
  const NamespaceId a = Ns("a");
  std::vector<CatalogEntry> entries;
  for (int i = 0; i < 50; ++i) entries.push_back(Entry(a, i));
  {
    auto cat = *Catalog::Open(dir_);
    ASSERT_TRUE(cat->PutBatch(entries).ok());
  }
  auto cat = *Catalog::Open(dir_);
  int n = 0;
  ASSERT_TRUE(cat->ForEach([&](const CatalogEntry& e) {
                   EXPECT_EQ(e.ns, a);
                   ++n;
                   return absl::OkStatus();
                 })
                  .ok());
  EXPECT_EQ(n, 50);
}

// What the write-ahead log files hold (bytes a reopen would replay).
uint64_t LogBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() == ".log") bytes += f.file_size();
  }
  return bytes;
}

TEST_F(CatalogTest, ACleanCloseLeavesNothingToReplay) {
  const NamespaceId ns = Ns("a");
  {
    auto cat = Catalog::Open(dir_);
    ASSERT_TRUE(cat.ok()) << cat.status();
    std::vector<CatalogEntry> batch;
    for (int i = 0; i < 2000; ++i) batch.push_back(Entry(ns, i));
    ASSERT_TRUE((*cat)->PutBatch(batch).ok());
    EXPECT_GT(LogBytes(dir_), 2000u * 64);  // committed to the log, not yet in a table
  }
  EXPECT_EQ(LogBytes(dir_), 0u);
  auto cat = Catalog::Open(dir_);
  ASSERT_TRUE(cat.ok()) << cat.status();
  std::set<uint64_t> sequences;
  ASSERT_TRUE((*cat)
                  ->ForEach([&](const CatalogEntry& e) {
                    sequences.insert(e.sequence);
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_EQ(sequences.size(), 2000u);
  EXPECT_EQ(*sequences.begin(), Entry(ns, 0).sequence);
  EXPECT_EQ(*sequences.rbegin(), Entry(ns, 1999).sequence);
}

TEST_F(CatalogTest, SecondOpenOfTheSameCatalogIsUnavailable) {
  auto first = Catalog::Open(dir_);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(Catalog::Open(dir_).status().code(), absl::StatusCode::kUnavailable);
}

TEST(CatalogRecordTest, MalformedRecordsAreDataLoss) {
  const CatalogEntry e = Entry(Ns("a"), 3);
  const std::string key = EncodeCatalogKey(e.ns, e.key);
  const std::string value = EncodeCatalogValue(e);
  ASSERT_TRUE(DecodeCatalogRecord(key, value).ok());
  EXPECT_EQ(DecodeCatalogRecord(key.substr(0, 16), value).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeCatalogRecord(key, value.substr(1)).status().code(), absl::StatusCode::kDataLoss);
  std::string bad_version = value;
  bad_version[0] = 9;
  EXPECT_EQ(DecodeCatalogRecord(key, bad_version).status().code(), absl::StatusCode::kDataLoss);
  std::string bad_parent = value;
  bad_parent[41] = static_cast<char>(200);
  EXPECT_EQ(DecodeCatalogRecord(key, bad_parent).status().code(), absl::StatusCode::kDataLoss);
}

// A slot no device can have (an 8-byte SlabAllocator::Slot could not hold
// it) is refused, not truncated into some other block's slot.
TEST(CatalogRecordTest, SlotsOutOfAnyDevicesRangeAreDataLoss) {
  CatalogEntry e = Entry(Ns("a"), 3);
  const std::string key = EncodeCatalogKey(e.ns, e.key);
  e.offset = SlabAllocator::kMaxCapacity - SlabAllocator::kAlignment;
  e.size_class = SlabAllocator::kMaxClasses - 1;
  ASSERT_TRUE(DecodeCatalogRecord(key, EncodeCatalogValue(e)).ok());
  CatalogEntry far = e;
  far.offset = SlabAllocator::kMaxCapacity + 4096;
  EXPECT_EQ(DecodeCatalogRecord(key, EncodeCatalogValue(far)).status().code(),
            absl::StatusCode::kDataLoss);
  CatalogEntry odd_class = e;
  odd_class.size_class = SlabAllocator::kMaxClasses;
  EXPECT_EQ(DecodeCatalogRecord(key, EncodeCatalogValue(odd_class)).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace kvtier
