// Launch geometry shared by the .cu files: grid-stride loops of kThreads-thread blocks.
// Included only by .cu files (nvcc).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

namespace satrap::grid {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements (capped: the loop covers the rest).
inline unsigned blocks_for(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<size_t>(b, 1, 65535));
}

__device__ inline size_t grid_index() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline size_t grid_stride() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

}  // namespace satrap::grid
