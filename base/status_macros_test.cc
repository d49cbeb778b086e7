#include "base/status_macros.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace kvtier {
namespace {

absl::Status Check(int x, int* calls) {
  ++*calls;
  if (x < 0) return absl::InvalidArgumentError("negative");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> Make(int x) {
  if (x < 0) return absl::OutOfRangeError("no box for a negative");
  return std::make_unique<int>(x);
}

absl::Status Twice(int a, int b, int* calls) {
  RETURN_IF_ERROR(Check(a, calls));
  RETURN_IF_ERROR(Check(b, calls));
  return absl::OkStatus();
}

absl::StatusOr<int> Sum(int a, int b) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> x, Make(a));
  ASSIGN_OR_RETURN(auto y, Make(b));  // two in one scope
  return *x + *y;
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtTheFirstErrorAndEvaluatesOnce) {
  int calls = 0;
  EXPECT_TRUE(Twice(1, 2, &calls).ok());
  EXPECT_EQ(calls, 2);
  calls = 0;
  EXPECT_EQ(Twice(-1, 2, &calls), absl::InvalidArgumentError("negative"));
  EXPECT_EQ(calls, 1);
  calls = 0;
  EXPECT_EQ(Twice(1, -2, &calls), absl::InvalidArgumentError("negative"));
  EXPECT_EQ(calls, 2);
}

TEST(StatusMacrosTest, AssignOrReturnMovesTheValueOrReturnsTheErrorUnchanged) {
  EXPECT_EQ(*Sum(2, 3), 5);
  EXPECT_EQ(Sum(-1, 3).status(), absl::OutOfRangeError("no box for a negative"));
  EXPECT_EQ(Sum(1, -3).status(), absl::OutOfRangeError("no box for a negative"));
}

}  // namespace
}  // namespace kvtier
