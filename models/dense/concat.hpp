// Per-sample concatenation of a [batch x a] block and a [batch x b] block into [batch x (a+b)],
// and its inverse (the backward); the dense models use it to join bottom(dense) and the pooled
// embeddings. Threading: free functions on caller-owned memory.
#pragma once

#include <cstddef>
#include <cstring>

namespace satrap {

// out[s] = [x[s], y[s]].
inline void concat_rows(int batch, int a, const float* x, int b, const float* y, float* out) {
  const size_t w = static_cast<size_t>(a) + b;
  for (int s = 0; s < batch; ++s) {
    std::memcpy(out + s * w, x + static_cast<size_t>(s) * a, sizeof(float) * a);
    std::memcpy(out + s * w + a, y + static_cast<size_t>(s) * b, sizeof(float) * b);
  }
}

// dx[s] = dout[s][0:a], dy[s] = dout[s][a:a+b]. dx or dy may be null.
inline void split_rows(int batch, int a, float* dx, int b, float* dy, const float* dout) {
  const size_t w = static_cast<size_t>(a) + b;
  for (int s = 0; s < batch; ++s) {
    if (dx != nullptr)
      std::memcpy(dx + static_cast<size_t>(s) * a, dout + s * w, sizeof(float) * a);
    if (dy != nullptr)
      std::memcpy(dy + static_cast<size_t>(s) * b, dout + s * w + a, sizeof(float) * b);
  }
}

}  // namespace satrap
