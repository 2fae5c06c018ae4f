// What the store benches share (embedding_store_bench, store_stages, store_layouts): the bench's
// batches of ids, thread CPU time, medians and the process's huge pages.
#pragma once

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace satrap::bench {

inline double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// `batches` batches of `batch_ids` distinct ids in [0, rows): Zipf(1.1) ranks by inverse CDF,
// scattered by an affine bijection (or uniform). `draws`, when given, counts the ids drawn.
inline std::vector<std::vector<uint64_t>> id_batches(size_t rows, size_t batches, size_t batch_ids,
                                                     uint64_t seed, bool uniform = false,
                                                     size_t* draws = nullptr) {
  std::vector<double> cdf(uniform ? 0 : rows);
  double sum = 0;
  for (size_t r = 0; r < cdf.size(); ++r)
    cdf[r] = (sum += std::pow(double(r + 1), -1.1));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, sum);
  std::vector<uint8_t> seen(rows, 0);
  std::vector<std::vector<uint64_t>> out(batches);
  for (auto& b : out) {
    std::fill(seen.begin(), seen.end(), 0);
    while (b.size() < std::min(batch_ids, rows)) {
      // 2654435761 is odd and not a multiple of 5: a bijection mod rows for the benches' sizes.
      uint64_t id =
        uniform
          ? rng() % rows
          : (static_cast<uint64_t>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin())
               * 2654435761ULL
             + 12345)
              % rows;
      if (draws)
        ++*draws;
      if (!seen[id]) {
        seen[id] = 1;
        b.push_back(id);
      }
    }
  }
  return out;
}

// The process's AnonHugePages in KiB (/proc/self/smaps_rollup; 0 when unreadable).
inline size_t anon_huge_kib() {
  FILE* f = std::fopen("/proc/self/smaps_rollup", "r");
  char line[256];
  size_t kib = 0;
  while (f && std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "AnonHugePages: %zu kB", &kib) == 1)
      break;
  if (f)
    std::fclose(f);
  return kib;
}

}  // namespace satrap::bench
