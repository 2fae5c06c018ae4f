#include "models/dense/relu.hpp"

namespace satrap {

// ivdep: outputs may alias inputs exactly (element-wise), never partially; lets GCC vectorize.
// Both loads are unconditional, so the selects vectorize (a conditional load of dy[i] made the
// backward a branch per element).
[[gnu::target_clones("avx2", "default")]] void relu_forward(size_t n, const float* x, float* y) {
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

[[gnu::target_clones("avx2", "default")]] void relu_backward(size_t n, const float* y,
                                                             const float* dy, float* dx) {
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

}  // namespace satrap
