// Inside models/dense/interaction.cpp (not for other code): the pairwise-dot kernels for any
// embedding dimension, on eight-float vectors (v8). interaction.cpp holds the dim-16 kernels
// (v16) and the public entry points, and is the only file that includes this one: every function
// here is always inlined into those entry points, so it is compiled with their flags (no FP
// contraction, models/CMakeLists.txt) into each of their target_clones (AVX-512, AVX2, default).
// Threading: pure functions.
#pragma once

#include <cstring>
#include <utility>

namespace satrap::interaction_detail {

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
    b[k] = __builtin_shuffle(p[2 * k], p[2 * k + 1], even)
           + __builtin_shuffle(p[2 * k], p[2 * k + 1], odd);
  for (int k = 0; k < 2; ++k)
    c[k] = __builtin_shuffle(b[2 * k], b[2 * k + 1], lo2)
           + __builtin_shuffle(b[2 * k], b[2 * k + 1], hi2);
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
      if (k >= m)
        continue;
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
        for (int d = dim8; d < dim; ++d)
          r[k] += v[pi[k]][d] * v[pj[k]][d];
    if (m == block)
      store8(dots + p0, r);
    else
      for (int k = 0; k < m; ++k)
        dots[p0 + k] = r[k];
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
    if (pass != nullptr)
      load8(acc[0], pass + d0);
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
      for (int j = 0; j < n; ++j)
        acc += gi[j] * v[j][d];
      to[d] = acc;
    }
}

}  // namespace satrap::interaction_detail
