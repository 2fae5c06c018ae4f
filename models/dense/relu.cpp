#include "models/dense/relu.hpp"

namespace satrap {

void relu_forward(size_t n, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward(size_t n, const float* y, const float* dy, float* dx) {
  for (size_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace satrap
