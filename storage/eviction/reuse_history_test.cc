#include "storage/eviction/reuse_history.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>

namespace kvtier {
namespace {

TEST(ReuseHistoryTest, RemembersEveryFingerprintOfTheCurrentAndOldGenerations) {
  ReuseHistory history(/*min_entries=*/1000);
  std::mt19937_64 rng(7);
  std::vector<uint64_t> added;
  for (int i = 0; i < 1999; ++i) {  // one full generation and most of the next
    added.push_back(rng());
    history.Add(added.back(), 0);
  }
  for (uint64_t fp : added) EXPECT_TRUE(history.MaybeContains(fp));
}

TEST(ReuseHistoryTest, FalsePositivesStayNearOnePercent) {
  ReuseHistory history(/*min_entries=*/10000);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 10000; ++i) history.Add(rng(), 0);
  int false_positives = 0;
  for (int i = 0; i < 100000; ++i) false_positives += history.MaybeContains(rng());
  EXPECT_LT(false_positives, 2000) << "10 bits and 7 probes per entry give about 1%";
}

TEST(ReuseHistoryTest, ForgetsAfterTwoGenerations) {
  ReuseHistory history(/*min_entries=*/100);
  std::mt19937_64 rng(3);
  std::vector<uint64_t> first;
  for (int i = 0; i < 100; ++i) {
    first.push_back(rng());
    history.Add(first.back(), 0);
  }
  EXPECT_EQ(history.current_entries(), 100u);
  for (int i = 0; i < 200; ++i) history.Add(rng(), 0);  // two more generations
  int remembered = 0;
  for (uint64_t fp : first) remembered += history.MaybeContains(fp);
  EXPECT_LT(remembered, 10) << "the first generation was retired twice over";
}

TEST(ReuseHistoryTest, GenerationsAreSizedWhenTheyStart) {
  ReuseHistory history(/*min_entries=*/10);
  history.Add(1, 500);
  EXPECT_EQ(history.current_capacity(), 500u);
  EXPECT_EQ(history.memory_bytes(), (500u * 10 + 63) / 64 * 8);
  for (uint64_t i = 0; i < 499; ++i) history.Add(i + 2, 5);
  EXPECT_EQ(history.current_capacity(), 500u) << "not resized until full";
  history.Add(1000, 5);
  EXPECT_EQ(history.current_capacity(), 10u) << "the minimum";
}

}  // namespace
}  // namespace kvtier
