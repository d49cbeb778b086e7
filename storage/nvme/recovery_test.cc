#include "storage/nvme/recovery.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kvtier {
namespace {

const NamespaceId kNs = NamespaceId::FromParts(7, 9);
const NamespaceId kOtherNs = NamespaceId::FromParts(7, 10);
BlockKey Key(const std::string& k) { return k.empty() ? BlockKey() : *BlockKey::Create(k); }

CatalogEntry Entry(const std::string& key, const std::string& parent, const NamespaceId& ns = kNs) {
  CatalogEntry e;
  e.ns = ns;
  e.key = Key(key);
  e.parent = Key(parent);
  e.payload_bytes = 1;
  return e;
}

struct Outcome {
  std::vector<std::string> admitted;
  std::vector<std::string> dropped;
  RecoveryResult result;
};

Outcome Replay(std::vector<CatalogEntry> entries, uint64_t corrupt,
               const std::vector<std::string>& refuse = {}) {
  Outcome out;
  CatalogReplay replay(CatalogReplay::Entries(entries.begin(), entries.end()), corrupt);
  out.result = replay.Run(
      [&](const CatalogEntry& e) {
        for (const std::string& r : refuse) {
          if (e.key == Key(r)) return false;
        }
        out.admitted.push_back(std::string(e.key.bytes()));
        return true;
      },
      [&](const CatalogEntry& e) { out.dropped.push_back(std::string(e.key.bytes())); });
  return out;
}

TEST(CatalogReplayTest, ParentsBeforeChildrenWhateverTheCatalogOrder) {
  Outcome o = Replay({Entry("c", "b"), Entry("b", "a"), Entry("a", ""), Entry("d", "a")}, 0);
  EXPECT_EQ(o.admitted, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_TRUE(o.dropped.empty());
  EXPECT_EQ(o.result.recovered, 4u);
  EXPECT_EQ(o.result.dropped, 0u);
}

TEST(CatalogReplayTest, OrphansAndTheirDescendantsAreDropped) {
  // "y" names a parent the catalog lacks; "z" descends from it.
  Outcome o = Replay({Entry("z", "y"), Entry("a", ""), Entry("y", "missing")}, 2);
  EXPECT_EQ(o.admitted, (std::vector<std::string>{"a"}));
  EXPECT_EQ(o.dropped, (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(o.result.recovered, 1u);
  EXPECT_EQ(o.result.dropped, 4u);  // two orphans + two undecodable records
}

TEST(CatalogReplayTest, ARefusedEntryDropsItsSubtree) {
  Outcome o = Replay({Entry("a", ""), Entry("b", "a"), Entry("c", "b"), Entry("d", "a")}, 0,
                     /*refuse=*/{"b"});
  EXPECT_EQ(o.admitted, (std::vector<std::string>{"a", "d"}));
  EXPECT_EQ(o.dropped, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(o.result.recovered, 2u);
  EXPECT_EQ(o.result.dropped, 2u);
}

TEST(CatalogReplayTest, EachEntryIsAnnouncedOnceAndAheadOfItsAdmission) {
  // One chain of 20 blocks, in reverse catalog order.
  CatalogReplay::Entries entries;
  for (int i = 19; i >= 0; --i) {
    entries.push_back(Entry(absl::StrCat("b", i), i == 0 ? "" : absl::StrCat("b", i - 1)));
  }
  CatalogReplay replay(std::move(entries));
  std::vector<std::string> admitted;
  absl::flat_hash_map<std::string, size_t> announced_at;  // admissions so far
  const RecoveryResult r = replay.Run(
      [&](const CatalogEntry& e) {
        admitted.push_back(std::string(e.key.bytes()));
        return true;
      },
      [](const CatalogEntry&) {},
      [&](const CatalogEntry& e) {
        EXPECT_TRUE(announced_at.emplace(std::string(e.key.bytes()), admitted.size()).second)
            << "announced twice: " << e.key.bytes();
      });
  ASSERT_EQ(r.recovered, 20u);
  ASSERT_EQ(admitted.size(), 20u);
  for (size_t k = 0; k < admitted.size(); ++k) {
    EXPECT_EQ(admitted[k], absl::StrCat("b", k));
    auto it = announced_at.find(admitted[k]);
    ASSERT_NE(it, announced_at.end()) << admitted[k] << " was never announced";
    // Announced before its admission, and (but for the walk's first
    // entries) several admissions before it.
    EXPECT_LE(it->second + std::min<size_t>(k, 4), k) << admitted[k];
  }
}

TEST(CatalogReplayTest, ACycleRecoversNothingOfIt) {
  Outcome o = Replay({Entry("p", "q"), Entry("q", "p"), Entry("r", "")}, 0);
  EXPECT_EQ(o.admitted, (std::vector<std::string>{"r"}));
  EXPECT_EQ(o.dropped.size(), 2u);
  EXPECT_EQ(o.result.dropped, 2u);
}

TEST(CatalogReplayTest, AParentIsFoundOnlyInItsChildsNamespace) {
  // The other namespace's "b" names parent "x", which only kNs holds: an
  // orphan. Its "a" (a key kNs also has) is the child of its own "c", and
  // its "d" descends from that "a", not from kNs's.
  Outcome o =
      Replay({Entry("a", ""), Entry("x", "a"), Entry("b", "x", kOtherNs), Entry("c", "", kOtherNs),
              Entry("a", "c", kOtherNs), Entry("d", "a", kOtherNs)},
             0);
  EXPECT_EQ(o.admitted, (std::vector<std::string>{"a", "x", "c", "a", "d"}));
  EXPECT_EQ(o.dropped, (std::vector<std::string>{"b"}));
  EXPECT_EQ(o.result.recovered, 5u);
}

TEST(CatalogReplayTest, CountsEntriesByNamespace) {
  CatalogReplay replay(
      {Entry("a", ""), Entry("b", "a"), Entry("c", "", kOtherNs), Entry("z", "missing")}, 0);
  const auto counts = replay.CountsByNamespace();
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts.at(kNs), 3u);
  EXPECT_EQ(counts.at(kOtherNs), 1u);
}

}  // namespace
}  // namespace kvtier
