// HugePageAllocator: a standard allocator whose large allocations (2 MiB and
// more) are anonymous mappings advised MADV_HUGEPAGE, for the few vectors of
// hundreds of MiB a recovery at 10^7 blocks builds at once. Faulted in with
// 4 KiB pages, the catalog replay's entries (1.3 GB at 10^7) took about
// 300,000 page faults, most of its read time on a VM, where glibc's malloc
// gives huge pages only under GLIBC_TUNABLES=glibc.malloc.hugetlb=1.
// Where the kernel allows transparent huge pages (`always` or `madvise` in
// /sys/kernel/mm/transparent_hugepage/enabled) the 2 MiB-aligned parts of a
// large allocation are then faulted in 2 MiB at a time (mmap aligns only to
// 4 KiB: the head and tail may keep base pages, a negligible share of the
// arrays this is for); elsewhere the advice changes nothing. Smaller
// allocations come from std::allocator.
//
// Thread-safety: stateless; as safe as mmap and operator new.
#ifndef KVTIER_BASE_HUGE_PAGE_ALLOCATOR_H_
#define KVTIER_BASE_HUGE_PAGE_ALLOCATOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "base/huge_page.h"

namespace kvtier {

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;

  HugePageAllocator() = default;
  // Implicit, as containers rebind allocators by conversion.
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT(google-explicit-constructor)

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    if (!Mapped(n)) return std::allocator<T>().allocate(n);
    void* p =
        mmap(nullptr, MappedBytes(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, MappedBytes(n), MADV_HUGEPAGE);  // advice only: a refusal leaves base pages
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (!Mapped(n)) return std::allocator<T>().deallocate(p, n);
    munmap(p, MappedBytes(n));
  }

  // Whether an allocation of n elements is a mapping of its own.
  static bool Mapped(size_t n) { return n * sizeof(T) >= kHugePageBytes; }

  // Stateless: any two compare equal, whatever their element types.
  template <typename U>
  friend bool operator==(const HugePageAllocator&, const HugePageAllocator<U>&) {
    return true;
  }

 private:
  static size_t MappedBytes(size_t n) {
    return (n * sizeof(T) + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  }
};

}  // namespace kvtier

#endif  // KVTIER_BASE_HUGE_PAGE_ALLOCATOR_H_
