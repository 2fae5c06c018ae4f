#include "runtime/memory_release.hpp"

#include <malloc.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>

namespace satrap {

memory_figures memory_figures_now() {
  memory_figures f;
  if (FILE* statm = std::fopen("/proc/self/statm", "r")) {
    long long size = 0, resident = 0;
    if (std::fscanf(statm, "%lld %lld", &size, &resident) == 2)
      f.rss_bytes = resident * ::sysconf(_SC_PAGESIZE);
    std::fclose(statm);
  }
  auto m = ::mallinfo2();
  f.in_use_bytes = static_cast<int64_t>(m.uordblks + m.hblkhd);
  f.free_bytes = static_cast<int64_t>(m.fordblks);
  return f;
}

memory_figures memory_release(std::string_view why, env& e) {
  auto before = memory_figures_now();
  auto start = e.steady_now();
  ::malloc_trim(0);
  auto ms = std::chrono::duration<double, std::milli>(e.steady_now() - start).count();
  auto after = memory_figures_now();
  constexpr double mib = 1 << 20;
  spdlog::info(
    "memory_released why={} rss_before_mib={:.1f} rss_after_mib={:.1f} "
    "heap_in_use_mib={:.1f} heap_free_before_mib={:.1f} heap_free_after_mib={:.1f} ms={:.1f}",
    why, before.rss_bytes / mib, after.rss_bytes / mib, after.in_use_bytes / mib,
    before.free_bytes / mib, after.free_bytes / mib, ms);
  return after;
}

}  // namespace satrap
