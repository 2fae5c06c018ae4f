// Helpers of the GPU tests (satrap_gpu_test): deterministic random inputs, device copies, and the
// comparisons against the CPU twins (element-wise under atol + rtol, or relative L2).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "models/cuda/cuda_util.hpp"

namespace satrap::gpu_test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v)
    x = dist(rng);
  return v;
}

}  // namespace satrap::gpu_test

#define REQUIRE_OK(expr)                                                                     \
  do {                                                                                       \
    const auto& require_ok_status_ = (expr);                                                 \
    INFO(#expr);                                                                             \
    REQUIRE_MESSAGE(require_ok_status_.ok(),                                                 \
                    (require_ok_status_.ok() ? std::string() : require_ok_status_.error())); \
  } while (0)

namespace satrap::gpu_test {

template <class T>
device_array<T> to_device(const std::vector<T>& h) {
  device_array<T> d;
  REQUIRE_OK(d.reserve(std::max<size_t>(h.size(), 1)));
  REQUIRE_OK(SATRAP_CUDA_CHECK(
    cudaMemcpy(d.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)));
  return d;
}

template <class T>
std::vector<T> to_host(const device_array<T>& d, size_t n) {
  std::vector<T> h(n);
  REQUIRE_OK(SATRAP_CUDA_CHECK(cudaDeviceSynchronize()));
  REQUIRE_OK(
    SATRAP_CUDA_CHECK(cudaMemcpy(h.data(), d.data(), n * sizeof(T), cudaMemcpyDeviceToHost)));
  return h;
}

// |gpu - cpu| <= atol + rtol * |cpu| everywhere; reports the worst element.
inline void check_close(const char* what, const std::vector<float>& gpu,
                        const std::vector<float>& cpu, double atol, double rtol) {
  REQUIRE(gpu.size() == cpu.size());
  size_t worst = 0;
  double worst_excess = -1.0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    double err = std::abs(double{gpu[i]} - double{cpu[i]});
    double excess = err - (atol + rtol * std::abs(double{cpu[i]}));
    if (!(excess <= 0.0) || excess > worst_excess) {  // NaN counts as the worst
      worst_excess = std::isnan(excess) ? 1e30 : excess;
      worst = i;
    }
  }
  INFO(what << ": worst at " << worst << ": gpu " << gpu[worst] << " cpu " << cpu[worst]
            << " (atol " << atol << ", rtol " << rtol << ")");
  CHECK(worst_excess <= 0.0);
}

// ||gpu - cpu|| <= rtol * ||cpu|| (L2): for whole-network gradients, where a ReLU whose input is
// within rounding of 0 may open on one side and not the other and move a few elements a lot.
inline void check_rel_l2(const char* what, const std::vector<float>& gpu,
                         const std::vector<float>& cpu, double rtol) {
  REQUIRE(gpu.size() == cpu.size());
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    double d = double{gpu[i]} - double{cpu[i]};
    diff += d * d;
    norm += double{cpu[i]} * cpu[i];
  }
  double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
  INFO(what << ": relative L2 error " << rel << " (rtol " << rtol << ")");
  CHECK(rel <= rtol);
}

}  // namespace satrap::gpu_test
