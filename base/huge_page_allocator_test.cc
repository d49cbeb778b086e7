#include "base/huge_page_allocator.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/process_mappings.h"
#include "testing/sanitizers.h"

namespace kvtier {
namespace {

using ::kvtier::testing::MappedBytes;
using ::kvtier::testing::VmFlagsOf;

// Whether the kernel gives transparent huge pages to advised memory.
bool KernelTakesTheAdvice() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(f, modes);
  return modes.find("[always]") != std::string::npos ||
         modes.find("[madvise]") != std::string::npos;
}

TEST(HugePageAllocatorTest, OnlyAllocationsOfAHugePageOrMoreAreMappings) {
  EXPECT_FALSE(HugePageAllocator<uint64_t>::Mapped(1));
  EXPECT_FALSE(HugePageAllocator<uint64_t>::Mapped(kHugePageBytes / 8 - 1));
  EXPECT_TRUE(HugePageAllocator<uint64_t>::Mapped(kHugePageBytes / 8));
  EXPECT_TRUE(HugePageAllocator<char>::Mapped(kHugePageBytes));
  // Stateless: allocators of any element types compare equal.
  EXPECT_TRUE(HugePageAllocator<uint64_t>() == HugePageAllocator<char>());
  EXPECT_FALSE(HugePageAllocator<uint64_t>() != HugePageAllocator<uint64_t>());
}

// A vector grown past 2 MiB moves from the heap into an advised mapping of
// its own, keeping every element, and gives the mapping back when freed.
TEST(HugePageAllocatorTest, AGrownVectorKeepsItsElementsInAnAdvisedMapping) {
  const uint64_t mapped_before = MappedBytes();
  {
    std::vector<uint64_t, HugePageAllocator<uint64_t>> v;
    const uint64_t n = (uint64_t{9} << 20) / sizeof(uint64_t);  // 9 MiB, through 4 growths past 2
    for (uint64_t i = 0; i < n; ++i) v.push_back(i * 0x9e3779b97f4a7c15ull);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < n; ++i) wrong += v[i] != i * 0x9e3779b97f4a7c15ull;
    EXPECT_EQ(wrong, 0u);
    const std::string flags = VmFlagsOf(v.data());
    ASSERT_NE(flags, "") << "no mapping holds the vector";
    const std::string last = VmFlagsOf(&v.back());
    if (KernelTakesTheAdvice()) {
      // "hg": the mapping carries MADV_HUGEPAGE, to the vector's last element.
      EXPECT_NE(flags.find(" hg "), std::string::npos) << flags;
      EXPECT_NE(last.find(" hg "), std::string::npos) << last;
    } else {
      std::printf("transparent huge pages are off here: the advice is not checked\n");
    }
  }
  // Nothing of the mappings outlives the vector.
  if (!::kvtier::testing::kSanitized) {
    EXPECT_EQ(MappedBytes(), mapped_before);
  }
}

}  // namespace
}  // namespace kvtier
