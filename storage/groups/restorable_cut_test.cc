#include "storage/groups/restorable_cut.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace kvtier {
namespace {

constexpr GroupRule kFull{GroupKind::kFullAttention, 0};
constexpr GroupRule kRec{GroupKind::kRecurrent, 0};
GroupRule Window(uint32_t blocks) { return {GroupKind::kSlidingWindow, blocks}; }

// The rules, read literally: cut k is restorable when every group holds
// what LoadRange names.
bool Oracle(const std::vector<GroupRule>& rules, const std::vector<std::vector<bool>>& held,
            size_t k) {
  for (size_t g = 0; g < rules.size(); ++g) {
    const KeyRange r = LoadRange(rules[g], k);
    for (size_t i = r.begin; i < r.end; ++i) {
      if (!held[g][i]) return false;
    }
  }
  return true;
}

size_t FullRun(const std::vector<GroupRule>& rules, const std::vector<std::vector<bool>>& held,
               size_t n) {
  size_t run = n;
  for (size_t g = 0; g < rules.size(); ++g) {
    if (rules[g].kind != GroupKind::kFullAttention) continue;
    size_t i = 0;
    while (i < n && held[g][i]) ++i;
    run = std::min(run, i);
  }
  return run;
}

TEST(RestorableCutTest, LoadRangesFollowTheGroupKinds) {
  EXPECT_EQ(LoadRange(kFull, 5), (KeyRange{0, 5}));
  EXPECT_EQ(LoadRange(Window(2), 5), (KeyRange{3, 5}));
  EXPECT_EQ(LoadRange(Window(8), 5), (KeyRange{0, 5}));
  EXPECT_EQ(LoadRange(kRec, 5), (KeyRange{4, 5}));
  EXPECT_EQ(LoadRange(kRec, 0), (KeyRange{0, 0}));
}

TEST(RestorableCutTest, ASnapshotOnlyAtACheckpointSetsTheCut) {
  // Full attention holds 10 blocks, the recurrent group snapshots after
  // blocks 3 and 7 (keys 3 and 7): the longest cut is 8, not 10.
  const std::vector<GroupRule> rules = {kFull, kRec};
  std::vector<std::vector<bool>> held = {std::vector<bool>(10, true), std::vector<bool>(10)};
  held[1][3] = held[1][7] = true;
  auto holds = [&](size_t g, size_t i) { return bool(held[g][i]); };
  EXPECT_EQ(LongestRestorableCut(rules, 10, 10, holds), 8u);
  EXPECT_EQ(LongestRestorableCut(rules, 10, 7, holds), 4u);  // full attention stops at 7
  held[1][3] = held[1][7] = false;
  EXPECT_EQ(LongestRestorableCut(rules, 10, 10, holds), 0u);
}

TEST(RestorableCutTest, ASlidingWindowNeedsOnlyItsLastBlocks) {
  // Window of 3 blocks; the engine kept blocks 6..9 of 10.
  const std::vector<GroupRule> rules = {kFull, Window(3)};
  std::vector<std::vector<bool>> held = {std::vector<bool>(10, true), std::vector<bool>(10)};
  for (size_t i = 6; i < 10; ++i) held[1][i] = true;
  auto holds = [&](size_t g, size_t i) { return bool(held[g][i]); };
  EXPECT_EQ(LongestRestorableCut(rules, 10, 10, holds), 10u);
  held[1][8] = false;  // a hole in the window: cuts 9 and 10 are gone, 8 lacks 5
  EXPECT_EQ(LongestRestorableCut(rules, 10, 10, holds), 0u);
}

TEST(RestorableCutTest, RandomPresenceMatchesTheOracleAndProbesEachKeyOnce) {
  std::mt19937 rng(18);
  for (int round = 0; round < 3000; ++round) {
    const size_t n = 1 + rng() % 24;
    std::vector<GroupRule> rules = {kFull};
    const int extra = 1 + rng() % 3;
    for (int e = 0; e < extra; ++e) {
      switch (rng() % 3) {
        case 0:
          rules.push_back(kFull);
          break;
        case 1:
          rules.push_back(Window(1 + rng() % 6));
          break;
        default:
          rules.push_back(kRec);
      }
    }
    std::vector<std::vector<bool>> held(rules.size(), std::vector<bool>(n));
    const double p = 0.5 + 0.5 * (rng() % 100) / 100.0;
    std::bernoulli_distribution coin(p);
    for (auto& h : held) {
      for (size_t i = 0; i < n; ++i) h[i] = coin(rng);
    }
    std::vector<std::vector<int>> probes(rules.size(), std::vector<int>(n));
    auto holds = [&](size_t g, size_t i) {
      EXPECT_NE(rules[g].kind, GroupKind::kFullAttention);
      ++probes[g][i];
      return bool(held[g][i]);
    };
    const size_t run = FullRun(rules, held, n);
    const size_t k = LongestRestorableCut(rules, n, run, holds);
    size_t expect = 0;
    for (size_t c = 0; c <= n; ++c) {
      if (Oracle(rules, held, c)) expect = c;
    }
    ASSERT_EQ(k, expect) << "round " << round;
    for (const auto& per : probes) {
      for (int count : per) ASSERT_LE(count, 1);
    }
  }
}

TEST(RestorableCutTest, EveryRestorableCutIsListedDescendingEachKeyProbedOnce) {
  std::mt19937 rng(21);
  for (int round = 0; round < 3000; ++round) {
    const size_t n = 1 + rng() % 24;
    std::vector<GroupRule> rules = {kFull, Window(1 + rng() % 4)};
    if (rng() % 2) rules.push_back(kRec);
    std::vector<std::vector<bool>> held(rules.size(), std::vector<bool>(n));
    std::bernoulli_distribution coin(0.6 + 0.4 * (rng() % 100) / 100.0);
    for (auto& h : held) {
      for (size_t i = 0; i < n; ++i) h[i] = coin(rng);
    }
    std::vector<std::vector<int>> probes(rules.size(), std::vector<int>(n));
    auto holds = [&](size_t g, size_t i) {
      ++probes[g][i];
      return bool(held[g][i]);
    };
    const size_t run = FullRun(rules, held, n);
    const size_t max_cuts = 1 + rng() % 30;
    const std::vector<size_t> cuts = RestorableCuts(rules, n, run, max_cuts, holds);
    std::vector<size_t> expect;
    for (size_t c = std::min(n, run); c > 0 && expect.size() < max_cuts; --c) {
      if (Oracle(rules, held, c)) expect.push_back(c);
    }
    expect.push_back(0);
    ASSERT_EQ(cuts, expect) << "round " << round;
    for (const auto& per : probes) {
      for (int count : per) ASSERT_LE(count, 1);
    }
  }
}

}  // namespace
}  // namespace kvtier
