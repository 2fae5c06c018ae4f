// Element-wise ReLU, forward and backward (the backward uses the forward's output as the mask).
// Threading: free functions on caller-owned memory.
#pragma once

#include <cstddef>

namespace satrap {

void relu_forward(size_t n, const float* x, float* y);  // y may equal x
// dx = dy where y > 0, else 0. dx may equal dy.
void relu_backward(size_t n, const float* y, const float* dy, float* dx);

}  // namespace satrap
