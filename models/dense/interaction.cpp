#include "models/dense/interaction.hpp"

#include <cstring>

namespace satrap {

namespace {

// Vector v of sample-local vectors [x, e_1..e_slots].
inline const float* vec(const float* x, const float* emb, int v, int dim) {
  return v == 0 ? x : emb + static_cast<size_t>(v - 1) * dim;
}

}  // namespace

int interaction_output_size(int slots, int dim) {
  int n = slots + 1;
  return dim + n * (n - 1) / 2;
}

void interaction_forward(int batch, int slots, int dim, const float* x, const float* emb,
                         float* out) {
  int n = slots + 1, width = interaction_output_size(slots, dim);
  for (int s = 0; s < batch; ++s) {
    const float* xs = x + static_cast<size_t>(s) * dim;
    const float* es = emb + static_cast<size_t>(s) * slots * dim;
    float* o = out + static_cast<size_t>(s) * width;
    std::memcpy(o, xs, sizeof(float) * dim);
    float* dots = o + dim;
    for (int i = 0; i < n; ++i) {
      const float* a = vec(xs, es, i, dim);
      for (int j = i + 1; j < n; ++j) {
        const float* b = vec(xs, es, j, dim);
        float acc = 0.0f;
        for (int d = 0; d < dim; ++d) acc += a[d] * b[d];
        *dots++ = acc;
      }
    }
  }
}

void interaction_backward(int batch, int slots, int dim, const float* x, const float* emb,
                          const float* dout, float* dx, float* demb) {
  int n = slots + 1, width = interaction_output_size(slots, dim);
  for (int s = 0; s < batch; ++s) {
    const float* xs = x + static_cast<size_t>(s) * dim;
    const float* es = emb + static_cast<size_t>(s) * slots * dim;
    const float* g = dout + static_cast<size_t>(s) * width;
    float* dxs = dx + static_cast<size_t>(s) * dim;
    float* des = demb + static_cast<size_t>(s) * slots * dim;
    std::memcpy(dxs, g, sizeof(float) * dim);
    std::memset(des, 0, sizeof(float) * slots * dim);
    const float* gd = g + dim;
    for (int i = 0; i < n; ++i) {
      const float* a = vec(xs, es, i, dim);
      float* da = i == 0 ? dxs : des + static_cast<size_t>(i - 1) * dim;
      for (int j = i + 1; j < n; ++j) {
        const float* b = vec(xs, es, j, dim);
        float* db = des + static_cast<size_t>(j - 1) * dim;
        float gij = *gd++;
        for (int d = 0; d < dim; ++d) {
          da[d] += gij * b[d];
          db[d] += gij * a[d];
        }
      }
    }
  }
}

}  // namespace satrap
