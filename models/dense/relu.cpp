#include "models/dense/relu.hpp"

namespace satrap {

// ivdep: outputs may alias inputs exactly (element-wise), never partially; lets GCC vectorize.
void relu_forward(size_t n, const float* x, float* y) {
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward(size_t n, const float* y, const float* dy, float* dx) {
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace satrap
