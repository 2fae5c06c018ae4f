#include "models/dense/interaction.hpp"

#include <cstring>
#include <vector>

namespace satrap {

namespace {

// Eight floats in one register (two SSE registers in the default build).
typedef float v8 __attribute__((vector_size(32)));

// (By reference: a v8 passed by value would change the ABI between the two builds.)
inline void load8(v8& r, const float* p) { std::memcpy(&r, p, sizeof r); }
inline void store8(float* p, const v8& r) { std::memcpy(p, &r, sizeof r); }

// Vector v of sample-local vectors [x, e_1..e_slots].
inline const float* vec(const float* x, const float* emb, int v, int dim) {
  return v == 0 ? x : emb + static_cast<size_t>(v - 1) * dim;
}

}  // namespace

int interaction_output_size(int slots, int dim) {
  int n = slots + 1;
  return dim + n * (n - 1) / 2;
}

// Per sample, the vectors are transposed into t[d][v] (dim x n, rows padded), so that the dots of
// vector i with 8 later vectors at a time accumulate in one register: no horizontal sums, and each
// dot is still summed over d in order, as the plain loop would.
[[gnu::target_clones("avx2", "default")]]
void interaction_forward(int batch, int slots, int dim, const float* x, const float* emb,
                         float* out) {
  constexpr int block = 8;
  const int n = slots + 1, width = interaction_output_size(slots, dim);
  const int stride = (n + block - 1) / block * block + block;  // reads past n see zeros
  std::vector<float> t(static_cast<size_t>(dim) * stride, 0.0f);
  for (int s = 0; s < batch; ++s) {
    const float* xs = x + static_cast<size_t>(s) * dim;
    const float* es = emb + static_cast<size_t>(s) * slots * dim;
    float* o = out + static_cast<size_t>(s) * width;
    std::memcpy(o, xs, sizeof(float) * dim);
    for (int v = 0; v < n; ++v) {
      const float* a = vec(xs, es, v, dim);
      for (int d = 0; d < dim; ++d) t[static_cast<size_t>(d) * stride + v] = a[d];
    }
    float* dots = o + dim;
    for (int i = 0; i < n - 1; ++i) {
      const float* a = vec(xs, es, i, dim);
      for (int j0 = i + 1; j0 < n; j0 += block) {
        v8 acc = {}, td;
        for (int d = 0; d < dim; ++d) {
          load8(td, t.data() + static_cast<size_t>(d) * stride + j0);
          acc += a[d] * td;
        }
        const int m = n - j0 < block ? n - j0 : block;
        for (int k = 0; k < m; ++k) dots[k] = acc[k];
        dots += m;
      }
    }
  }
}

// Per sample, with G the symmetric n x n matrix of the dots' gradients (zero diagonal):
// d v_i = sum_j G_ij v_j (plus the pass-through gradient for v_0 = x), 8 dims at a time in one
// register, summed over j in order.
[[gnu::target_clones("avx2", "default")]]
void interaction_backward(int batch, int slots, int dim, const float* x, const float* emb,
                          const float* dout, float* dx, float* demb) {
  constexpr int block = 8;
  const int n = slots + 1, width = interaction_output_size(slots, dim);
  std::vector<float> gm(static_cast<size_t>(n) * n, 0.0f);
  std::vector<const float*> v(n);
  for (int s = 0; s < batch; ++s) {
    const float* xs = x + static_cast<size_t>(s) * dim;
    const float* es = emb + static_cast<size_t>(s) * slots * dim;
    const float* g = dout + static_cast<size_t>(s) * width;
    const float* gd = g + dim;
    for (int i = 0; i < n; ++i) {
      v[i] = vec(xs, es, i, dim);
      for (int j = i + 1; j < n; ++j, ++gd) gm[i * n + j] = gm[j * n + i] = *gd;
    }
    for (int i = 0; i < n; ++i) {
      const float* gi = gm.data() + static_cast<size_t>(i) * n;
      float* to = i == 0 ? dx + static_cast<size_t>(s) * dim
                         : demb + (static_cast<size_t>(s) * slots + (i - 1)) * dim;
      int d0 = 0;
      for (; d0 + block <= dim; d0 += block) {
        v8 acc = {}, vj;
        if (i == 0) load8(acc, g + d0);
        for (int j = 0; j < n; ++j) {
          load8(vj, v[j] + d0);
          acc += gi[j] * vj;
        }
        store8(to + d0, acc);
      }
      for (int d = d0; d < dim; ++d) {
        float acc = i == 0 ? g[d] : 0.0f;
        for (int j = 0; j < n; ++j) acc += gi[j] * v[j][d];
        to[d] = acc;
      }
    }
  }
}

}  // namespace satrap
