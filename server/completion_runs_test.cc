#include "server/completion_runs.h"

#include <gtest/gtest.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace kvtier {
namespace {

struct Sent {
  uint32_t index, run;
  int32_t code;
  uint64_t bytes;
  std::string key;
};

class CompletionRunsTest : public ::testing::Test {
 protected:
  CompletionRuns Make(bool runs) {
    return CompletionRuns(
        runs,
        [this](v1::BlockCompletion c) {
          sent_.push_back({c.index(), c.run(), c.code(), c.size_bytes(), c.key()});
          return sent_.size() < fail_after_;
        },
        [](uint32_t i) { return absl::StrCat("k", i); });
  }
  static BlockOutcome Ok(uint32_t i, uint64_t bytes = 4096) { return {i, absl::OkStatus(), bytes}; }
  std::vector<Sent> sent_;
  size_t fail_after_ = 1000;
};

TEST_F(CompletionRunsTest, WithoutRunsEveryBlockIsAMessage) {
  CompletionRuns c = Make(false);
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(c.Add(Ok(i)));
  ASSERT_TRUE(c.Flush());
  ASSERT_EQ(sent_.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(sent_[i].index, i);
    EXPECT_EQ(sent_[i].run, 0u);
    EXPECT_EQ(sent_[i].key, absl::StrCat("k", i));
  }
}

TEST_F(CompletionRunsTest, RunsEndAtFailuresSizeChangesTheGroupSizeAndFlush) {
  CompletionRuns c = Make(true);
  for (uint32_t i = 0; i < 5; ++i) ASSERT_TRUE(c.Add(Ok(i)));
  ASSERT_TRUE(c.Add({5, absl::NotFoundError("gone"), 0}));
  ASSERT_TRUE(c.Add(Ok(6)));
  ASSERT_TRUE(c.Add(Ok(7, 100)));  // a shorter last block
  for (uint32_t i = 8; i < 8 + CompletionRuns::kMaxRun + 2; ++i) ASSERT_TRUE(c.Add(Ok(i)));
  EXPECT_EQ(sent_.size(), 5u);  // the run of 64 went out when it reached 64
  ASSERT_TRUE(c.Flush());
  ASSERT_TRUE(c.Flush());  // nothing pending: nothing sent
  ASSERT_EQ(sent_.size(), 6u);
  // Each block's outcome is stated once, in order.
  const std::vector<std::tuple<uint32_t, uint32_t, int32_t, uint64_t>> want = {
      {0, 5, 0, 4096}, {5, 0, 5, 0},     {6, 0, 0, 4096},
      {7, 0, 0, 100},  {8, 64, 0, 4096}, {72, 2, 0, 4096}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(sent_[i].index, std::get<0>(want[i])) << i;
    EXPECT_EQ(sent_[i].run, std::get<1>(want[i])) << i;
    EXPECT_EQ(sent_[i].code, std::get<2>(want[i])) << i;
    EXPECT_EQ(sent_[i].bytes, std::get<3>(want[i])) << i;
    EXPECT_EQ(sent_[i].key, absl::StrCat("k", sent_[i].index)) << i;
  }
}

TEST_F(CompletionRunsTest, AGoneCallerStopsTheCall) {
  fail_after_ = 1;  // the first push already fails
  CompletionRuns c = Make(true);
  ASSERT_TRUE(c.Add(Ok(0)));  // pending, nothing sent yet
  EXPECT_FALSE(c.Add({1, absl::InternalError("x"), 0}));
}

}  // namespace
}  // namespace kvtier
