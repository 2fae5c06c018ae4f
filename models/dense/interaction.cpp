#include "models/dense/interaction.hpp"

#include <cstring>
#include <vector>

namespace satrap {

namespace {

// Eight floats in one register (two SSE registers in the default build).
typedef float v8 __attribute__((vector_size(32)));

// (By reference: a v8 passed by value would change the ABI between the two builds.)
[[gnu::always_inline]] inline void load8(v8& r, const float* p) { std::memcpy(&r, p, sizeof r); }
[[gnu::always_inline]] inline void store8(float* p, const v8& r) { std::memcpy(p, &r, sizeof r); }

// Vector v of sample-local vectors [x, e_1..e_slots].
[[gnu::always_inline]] inline const float* vec(const float* x, const float* emb, int v, int dim) {
  return v == 0 ? x : emb + static_cast<size_t>(v - 1) * dim;
}

// Eight partial dots (one per lane group of a v8 each) reduced to one v8 of their sums: lane k of
// r is the sum of the lanes of p[k]. Three levels of pairwise shuffles and adds.
[[gnu::always_inline]] inline void reduce8(const v8* p, v8& r) {
  typedef int i8 __attribute__((vector_size(32)));
  const i8 even = {0, 8, 2, 10, 4, 12, 6, 14}, odd = {1, 9, 3, 11, 5, 13, 7, 15};
  const i8 lo2 = {0, 1, 8, 9, 4, 5, 12, 13}, hi2 = {2, 3, 10, 11, 6, 7, 14, 15};
  const i8 lo4 = {0, 1, 2, 3, 8, 9, 10, 11}, hi4 = {4, 5, 6, 7, 12, 13, 14, 15};
  v8 b[4], c[2];
  for (int k = 0; k < 4; ++k)
    b[k] = __builtin_shuffle(p[2 * k], p[2 * k + 1], even) +
           __builtin_shuffle(p[2 * k], p[2 * k + 1], odd);
  for (int k = 0; k < 2; ++k)
    c[k] = __builtin_shuffle(b[2 * k], b[2 * k + 1], lo2) +
           __builtin_shuffle(b[2 * k], b[2 * k + 1], hi2);
  // c[0] = [p0 p1 p2 p3 sums of lanes 0-3 | the same of lanes 4-7], c[1] likewise for p4-p7.
  r = __builtin_shuffle(c[0], c[1], lo4) + __builtin_shuffle(c[0], c[1], hi4);
}

// The dots of one sample (see interaction_forward). DB > 0: dim is DB * 8, known at compile
// time, so the pair loop unrolls with every partial in a register; DB == 0: any dim.
template <int DB>
[[gnu::always_inline]] inline void sample_dots(int n, int dim, const float* const* v, float* dots) {
  constexpr int block = 8;
  const int pairs = n * (n - 1) / 2, dim8 = DB > 0 ? DB * block : dim / block * block;
  int i = 0, j = 1;
  for (int p0 = 0; p0 < pairs; p0 += block) {
    const int m = pairs - p0 < block ? pairs - p0 : block;
    v8 part[block];
    int pi[block], pj[block];
    for (int k = 0; k < block; ++k) {
      part[k] = v8{};
      if (k >= m) continue;
      pi[k] = i;
      pj[k] = j;
      const float* a = v[i];
      const float* c = v[j];
      v8 va, vc;
      if constexpr (DB > 0) {
        for (int d = 0; d < DB; ++d) {
          load8(va, a + d * block);
          load8(vc, c + d * block);
          part[k] += va * vc;
        }
      } else {
        for (int d = 0; d < dim8; d += block) {
          load8(va, a + d);
          load8(vc, c + d);
          part[k] += va * vc;
        }
      }
      if (++j == n) {
        ++i;
        j = i + 1;
      }
    }
    v8 r;
    reduce8(part, r);
    if (DB == 0 && dim8 < dim)
      for (int k = 0; k < m; ++k)
        for (int d = dim8; d < dim; ++d) r[k] += v[pi[k]][d] * v[pj[k]][d];
    if (m == block)
      store8(dots + p0, r);
    else
      for (int k = 0; k < m; ++k) dots[p0 + k] = r[k];
  }
}

// to = sum_j gi[j] v[j] (+ pass, when not null): one vector's gradient (see
// interaction_backward). DB > 0: dim is DB * 8, known at compile time; DB == 0: any dim.
template <int DB>
[[gnu::always_inline]] inline void vector_grad(int n, int dim, const float* gi,
                                               const float* const* v, const float* pass,
                                               float* to) {
  constexpr int block = 8;
  const int blocks = DB > 0 ? DB : dim / block;
  for (int b = 0; b < blocks; ++b) {
    const int d0 = b * block;
    v8 acc[4] = {}, vj;
    if (pass != nullptr) load8(acc[0], pass + d0);
    int j = 0;
    for (; j + 4 <= n; j += 4)
      for (int u = 0; u < 4; ++u) {
        load8(vj, v[j + u] + d0);
        acc[u] += gi[j + u] * vj;
      }
    for (; j < n; ++j) {
      load8(vj, v[j] + d0);
      acc[0] += gi[j] * vj;
    }
    store8(to + d0, (acc[0] + acc[1]) + (acc[2] + acc[3]));
  }
  if (DB == 0)
    for (int d = blocks * block; d < dim; ++d) {
      float acc = pass != nullptr ? pass[d] : 0.0f;
      for (int j = 0; j < n; ++j) acc += gi[j] * v[j][d];
      to[d] = acc;
    }
}

}  // namespace

int interaction_output_size(int slots, int dim) {
  int n = slots + 1;
  return dim + n * (n - 1) / 2;
}

// Per sample, the dots are taken eight pairs at a time in output order ((0,1), (0,2), ...,
// (1,2), ...): each pair's element-wise products in one register (dims in blocks of 8), the eight
// registers reduced to one by a shuffle tree and stored at once. No transposition, no long
// dependency chains (an earlier version transposed the vectors and summed each dot over d in one
// register chain: latency bound). Dims past a multiple of 8 are added in a scalar loop.
[[gnu::target_clones("avx2", "default")]]
void interaction_forward(int batch, int slots, int dim, const float* x, const float* emb,
                         float* out) {
  const int n = slots + 1, width = interaction_output_size(slots, dim);
  std::vector<const float*> v(n);
  for (int s = 0; s < batch; ++s) {
    const float* xs = x + static_cast<size_t>(s) * dim;
    const float* es = emb + static_cast<size_t>(s) * slots * dim;
    float* o = out + static_cast<size_t>(s) * width;
    std::memcpy(o, xs, sizeof(float) * dim);
    for (int k = 0; k < n; ++k) v[k] = vec(xs, es, k, dim);
    switch (dim) {
      case 8: sample_dots<1>(n, dim, v.data(), o + dim); break;
      case 16: sample_dots<2>(n, dim, v.data(), o + dim); break;
      case 32: sample_dots<4>(n, dim, v.data(), o + dim); break;
      default: sample_dots<0>(n, dim, v.data(), o + dim); break;
    }
  }
}

// Per sample, with G the symmetric n x n matrix of the dots' gradients (zero diagonal):
// d v_i = sum_j G_ij v_j (plus the pass-through gradient for v_0 = x), 8 dims at a time in one
// register. The sum over j runs in four interleaved accumulators (j mod 4), added at the end, so
// that the adds do not wait on each other.
[[gnu::target_clones("avx2", "default")]]
void interaction_backward(int batch, int slots, int dim, const float* x, const float* emb,
                          const float* dout, float* dx, float* demb) {
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
      const float* pass = i == 0 ? g : nullptr;
      switch (dim) {
        case 8: vector_grad<1>(n, dim, gi, v.data(), pass, to); break;
        case 16: vector_grad<2>(n, dim, gi, v.data(), pass, to); break;
        case 32: vector_grad<4>(n, dim, gi, v.data(), pass, to); break;
        default: vector_grad<0>(n, dim, gi, v.data(), pass, to); break;
      }
    }
  }
}

}  // namespace satrap
