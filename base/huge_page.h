// kHugePageBytes: x86-64's transparent huge page, the alignment and advice
// unit of the host arena (storage/host_arena.h) and of the large vectors
// base/huge_page_allocator.h maps.
#ifndef KVTIER_BASE_HUGE_PAGE_H_
#define KVTIER_BASE_HUGE_PAGE_H_

#include <cstddef>

namespace kvtier {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

}  // namespace kvtier

#endif  // KVTIER_BASE_HUGE_PAGE_H_
