// HugePageAllocator: a std::allocator for large, randomly accessed arrays.
//
// Allocations of 2 MiB and more are aligned to 2 MiB and offered to the kernel
// as transparent huge pages (madvise), so random lookups in a big parameter
// table miss the TLB far less often. Smaller ones come from malloc.
#ifndef KEEL_KV_HUGE_PAGE_ALLOCATOR_H_
#define KEEL_KV_HUGE_PAGE_ALLOCATOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace keel {

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;
  static constexpr size_t kHugePage = size_t{2} << 20;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT(runtime/explicit)

  T* allocate(size_t count) {
    const size_t bytes = count * sizeof(T);
    void* memory;
    if (bytes >= kHugePage) {
      const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
      memory = std::aligned_alloc(kHugePage, rounded);
      if (memory) madvise(memory, rounded, MADV_HUGEPAGE);
    } else {
      memory = std::malloc(bytes);
    }
    if (!memory) throw std::bad_alloc();
    return static_cast<T*>(memory);
  }
  void deallocate(T* memory, size_t /*count*/) { std::free(memory); }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const HugePageAllocator<U>&) const {
    return false;
  }
};

}  // namespace keel

#endif  // KEEL_KV_HUGE_PAGE_ALLOCATOR_H_
