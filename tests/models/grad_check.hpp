// Finite-difference helpers for the model tests (central differences on float parameters).
// Threading: test-only, single-threaded.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

namespace satrap::testing {

// Deterministic uniform(-scale, scale) values.
inline std::vector<float> random_vector(size_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (float& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;  // xorshift64
    x = static_cast<float>((static_cast<double>(s >> 11) * 0x1.0p-53 * 2.0 - 1.0) * scale);
  }
  return v;
}

// (f(x+h) - f(x-h)) / 2h, restoring x.
inline double numeric_derivative(const std::function<double()>& f, float& x, float h) {
  float saved = x;
  x = saved + h;
  double plus = f();
  x = saved - h;
  double minus = f();
  x = saved;
  return (plus - minus) / (2.0 * static_cast<double>(h));
}

// Checks analytic[i] against d f / d values[i] for every i.
inline void check_gradient(const std::function<double()>& f, std::vector<float>& values,
                           const std::vector<float>& analytic, float h, double atol, double rtol) {
  REQUIRE(values.size() == analytic.size());
  for (size_t i = 0; i < values.size(); ++i) {
    double numeric = numeric_derivative(f, values[i], h);
    INFO("index " << i << " numeric " << numeric << " analytic " << analytic[i]);
    CHECK(std::abs(numeric - analytic[i]) <= atol + rtol * std::abs(numeric));
  }
}

// sum_i weights[i] * out[i], in double: a scalar loss whose gradient w.r.t. out is `weights`.
inline double weighted_sum(const std::vector<float>& out, const std::vector<float>& weights) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i)
    s += static_cast<double>(out[i]) * weights[i];
  return s;
}

}  // namespace satrap::testing
