#include "models/dense/relu.hpp"

#include <algorithm>

namespace satrap {

void relu_forward(size_t n, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
}

void relu_backward(size_t n, const float* y, const float* dy, float* dx) {
  for (size_t i = 0; i < n; ++i) dx[i] = dy[i] * static_cast<float>(y[i] > 0.0f);  // branchless
}

}  // namespace satrap
