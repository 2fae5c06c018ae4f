// Large allocations for the store, backed by transparent huge pages when the kernel allows
// (madvise(MADV_HUGEPAGE)): random access over gigabytes of rows otherwise spends most of its time
// in TLB misses and page walks (worse under virtualisation). Small blocks get plain 64-byte
// aligned memory. Threading: free functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace satrap {

constexpr size_t huge_page_bytes = size_t{2} << 20;

// A software prefetch the optimiser keeps. GCC counts __builtin_prefetch as free of side effects,
// so a small callback that only prefetches and returns its argument (the store's peek) was found
// `const` and its call, prefetch and all, deleted: peek ran without row prefetches (measured: 134
// against 81 ns per id for lookup). The empty volatile asm marks the call as doing something,
// without a memory clobber (nothing is reloaded).
inline void prefetch_line(const void* p, bool for_write = false) {
  if (for_write)
    __builtin_prefetch(p, 1);
  else
    __builtin_prefetch(p);
  asm volatile("" : : "r"(p));
}

inline size_t huge_alloc_size(size_t bytes) {
  size_t align = bytes >= huge_page_bytes ? huge_page_bytes : 64;
  return (bytes + align - 1) / align * align;
}

// Blocks of 2 MiB or more are mapped directly (2 MiB aligned, the slack unmapped, so nothing is
// reserved beyond the rounded size); smaller ones come from malloc.
inline void* huge_alloc(size_t bytes) {
  size_t size = huge_alloc_size(bytes);
  if (size < huge_page_bytes) {
    void* p = std::aligned_alloc(64, size);
    if (!p)
      throw std::bad_alloc();
    return p;
  }
  void* raw = ::mmap(nullptr, size + huge_page_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    throw std::bad_alloc();
  auto base = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (base + huge_page_bytes - 1) & ~(huge_page_bytes - 1);
  if (aligned > base)
    ::munmap(raw, aligned - base);
  if (uintptr_t end = base + size + huge_page_bytes; end > aligned + size)
    ::munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  ::madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

// `bytes`: what was asked of huge_alloc.
inline void huge_free(void* p, size_t bytes) {
  if (!p)
    return;
  size_t size = huge_alloc_size(bytes);
  if (size < huge_page_bytes)
    std::free(p);
  else
    ::munmap(p, size);
}

}  // namespace satrap
