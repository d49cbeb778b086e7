#include "server/heap_tuning.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

#include "testing/sanitizers.h"

namespace kvtier {
namespace {

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// The point of the settings: the buffers of a burst of calls (16 of 1 MiB
// live at once, as 8 clients' messages and their copies are), allocated,
// filled and freed round after round, are faulted in once, not every round.
// Untuned, glibc gives the freed top of its heap back after each round
// (its trim threshold follows the largest buffer, not the burst) and the
// next round faults its 4096 pages in again: about 200000 faults in all.
TEST(HeapTuningTest, ABurstOfCallBuffersIsFaultedInOnceNotEveryRound) {
  if (::kvtier::testing::kSanitized) {
    GTEST_SKIP() << "a sanitizer's allocator replaces glibc's malloc here";
  }
  ASSERT_TRUE(TuneHeapForMessages().ok());
  constexpr size_t kBytes = 1 << 20;
  constexpr int kLive = 16;
  const long before = MinorFaults();
  for (int round = 0; round < 50; ++round) {
    char* live[kLive];
    for (char*& p : live) {
      p = static_cast<char*>(std::malloc(kBytes));
      ASSERT_NE(p, nullptr);
      std::memset(p, round, kBytes);
    }
    for (char* p : live) {
      // Keep the compiler from dropping the buffers.
      ASSERT_EQ(static_cast<unsigned char>(p[kBytes - 1]), static_cast<unsigned char>(round));
      std::free(p);
    }
  }
  EXPECT_LT(MinorFaults() - before, 20000);
}

}  // namespace
}  // namespace kvtier
