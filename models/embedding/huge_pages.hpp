// Large allocations for the store, backed by transparent huge pages when the kernel allows
// (madvise(MADV_HUGEPAGE)): random access over gigabytes of rows otherwise spends most of its time
// in TLB misses and page walks (worse under virtualisation). Small blocks get plain 64-byte
// aligned memory. Threading: free functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace satrap {

constexpr size_t huge_page_bytes = size_t{2} << 20;

inline size_t huge_alloc_size(size_t bytes) {
  size_t align = bytes >= huge_page_bytes ? huge_page_bytes : 64;
  return (bytes + align - 1) / align * align;
}

inline void* huge_alloc(size_t bytes) {
  size_t align = bytes >= huge_page_bytes ? huge_page_bytes : 64;
  void* p = std::aligned_alloc(align, huge_alloc_size(bytes));
  if (!p) throw std::bad_alloc();
  if (align == huge_page_bytes) ::madvise(p, huge_alloc_size(bytes), MADV_HUGEPAGE);
  return p;
}

inline void huge_free(void* p) { std::free(p); }

}  // namespace satrap
