#include "models/dense/interaction.hpp"
#include "models/dense/interaction_v8.hpp"

#include <cstring>
#include <utility>
#include <vector>

namespace satrap {

namespace {

using namespace interaction_detail;

// dim 16 (the default model's and the Kaggle DLRM's): one vector is one v16 (one AVX-512
// register; two AVX2 or four SSE registers in the other builds). Same arithmetic, in the same
// order, as sample_dots<2> and vector_grad<2>: only more of it per instruction.
typedef float v16 __attribute__((vector_size(64)));
typedef int i16 __attribute__((vector_size(64)));

[[gnu::always_inline]] inline void load16(v16& r, const float* p) { std::memcpy(&r, p, sizeof r); }
[[gnu::always_inline]] inline void store16(float* p, const v16& r) { std::memcpy(p, &r, sizeof r); }

// The (i, j) pair's index in output order (i < j < n).
constexpr int pair_index(int n, int i, int j) { return i * n - i * (i + 1) / 2 + (j - i - 1); }

// Sixteen pairs' products p[k] (16 lanes each: dims 0-15) reduced to r, lane k the dot of pair k:
// q = dims 0-7 + dims 8-15 (sample_dots<2>'s two blocks), then reduce8's tree on q, run on two
// pairs per register: low halves pairs 0-7, high halves pairs 8-15.
[[gnu::always_inline]] inline void reduce16(const v16* p, v16& r) {
  // Q[m]: lanes 0-7 = q of pair m, lanes 8-15 = q of pair m + 8.
  const i16 lo = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
  const i16 hi = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
  // reduce8's masks within each 256-bit half (second operand at 16).
  const i16 even = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30};
  const i16 odd = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31};
  const i16 lo2 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29};
  const i16 hi2 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31};
  const i16 lo4 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27};
  const i16 hi4 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31};
  v16 q[8], b[4], c[2];
  for (int m = 0; m < 8; ++m)
    q[m] = __builtin_shuffle(p[m], p[m + 8], lo) + __builtin_shuffle(p[m], p[m + 8], hi);
  for (int k = 0; k < 4; ++k)
    b[k] = __builtin_shuffle(q[2 * k], q[2 * k + 1], even)
           + __builtin_shuffle(q[2 * k], q[2 * k + 1], odd);
  for (int k = 0; k < 2; ++k)
    c[k] = __builtin_shuffle(b[2 * k], b[2 * k + 1], lo2)
           + __builtin_shuffle(b[2 * k], b[2 * k + 1], hi2);
  r = __builtin_shuffle(c[0], c[1], lo4) + __builtin_shuffle(c[0], c[1], hi4);
}

// r = dims 0-7 + dims 8-15 of prod.
[[gnu::always_inline]] inline void halves16(const v16& prod, v8& r) {
  const v8 lo = {prod[0], prod[1], prod[2], prod[3], prod[4], prod[5], prod[6], prod[7]};
  const v8 hi = {prod[8], prod[9], prod[10], prod[11], prod[12], prod[13], prod[14], prod[15]};
  r = lo + hi;
}

// One sample's forward at dim 16, any n: o[0:16] = x, then the dots in output order, sixteen
// pairs at a time (a last group of at most eight goes through sample_dots<2>'s eight-pair step).
[[gnu::always_inline]] inline void sample_dots16(int n, const float* const* v, float* o) {
  v16 a, c;
  load16(a, v[0]);
  store16(o, a);
  float* dots = o + 16;
  const int pairs = n * (n - 1) / 2;
  int i = 0, j = 1, p0 = 0;
  for (; pairs - p0 > 8; p0 += 16) {
    const int m = pairs - p0 < 16 ? pairs - p0 : 16;
    v16 part[16];
    for (int k = 0; k < 16; ++k) {
      part[k] = v16{};
      if (k >= m)
        continue;
      load16(a, v[i]);
      load16(c, v[j]);
      part[k] = a * c;
      if (++j == n) {
        ++i;
        j = i + 1;
      }
    }
    v16 r;
    reduce16(part, r);
    if (m == 16)
      store16(dots + p0, r);
    else
      for (int k = 0; k < m; ++k)
        dots[p0 + k] = r[k];
  }
  if (p0 < pairs) {  // at most eight left: as sample_dots<2> takes them
    const int m = pairs - p0;
    v8 part[8];
    for (int k = 0; k < 8; ++k) {
      part[k] = v8{};
      if (k >= m)
        continue;
      load16(a, v[i]);
      load16(c, v[j]);
      halves16(a * c, part[k]);
      if (++j == n) {
        ++i;
        j = i + 1;
      }
    }
    v8 r;
    reduce8(part, r);
    if (m == 8)
      store8(dots + p0, r);
    else
      for (int k = 0; k < m; ++k)
        dots[p0 + k] = r[k];
  }
}

// One sample's backward at dim 16, any n: to_i = sum_{j != i} G_ij v_j (+ pass for i = 0), with
// G the n x n matrix gm; the same four accumulators (j mod 4, the j past the last multiple of 4
// in the first) as vector_grad<2> (which also adds G_ii v_i = 0 v_i: the same sums).
[[gnu::always_inline]] inline void sample_grads16(int n, const float* const* v, const float* gm,
                                                  const float* pass, float* const* to) {
  const int quad_end = n / 4 * 4;
  for (int i = 0; i < n; ++i) {
    v16 acc[4] = {}, vj;
    if (i == 0)
      load16(acc[0], pass);
    for (int j = 0; j < n; ++j) {
      if (j == i)
        continue;  // G_ii = 0
      load16(vj, v[j]);
      acc[j < quad_end ? j % 4 : 0] += gm[static_cast<size_t>(i) * n + j] * vj;
    }
    store16(to[i], (acc[0] + acc[1]) + (acc[2] + acc[3]));
  }
}

// n known at compile time (N: the default model's 8 slots give 9): every pair, vector and
// accumulator index is a constant (index_sequence folds), so the N vectors stay in registers and
// nothing is indexed at run time. Same arithmetic and order as sample_dots16 / sample_grads16.
template <int N>
struct fixed_pairs {
  static constexpr int count = N * (N - 1) / 2;
  // The p-th pair's i and j in output order (0 past the end: a padding lane).
  static constexpr int first(int p) {
    for (int i = 0, q = 0; i < N; ++i)
      for (int j = i + 1; j < N; ++j, ++q)
        if (q == p)
          return i;
    return 0;
  }
  static constexpr int second(int p) {
    for (int i = 0, q = 0; i < N; ++i)
      for (int j = i + 1; j < N; ++j, ++q)
        if (q == p)
          return j;
    return 0;
  }
};

template <int N, int P0, size_t... K>
[[gnu::always_inline]] inline void fixed_products16(const v16* V, v16* part,
                                                    std::index_sequence<K...>) {
  using fp = fixed_pairs<N>;
  ((part[K] =
      P0 + int(K) < fp::count ? V[fp::first(P0 + int(K))] * V[fp::second(P0 + int(K))] : v16{}),
   ...);
}

template <int N, int P0, size_t... K>
[[gnu::always_inline]] inline void fixed_products8(const v16* V, v8* part,
                                                   std::index_sequence<K...>) {
  using fp = fixed_pairs<N>;
  ((P0 + int(K) < fp::count
      ? halves16(V[fp::first(P0 + int(K))] * V[fp::second(P0 + int(K))], part[K])
      : (void)(part[K] = v8{})),
   ...);
}

template <int N, int P0>
[[gnu::always_inline]] inline void fixed_dots16(const v16* V, float* dots) {
  constexpr int pairs = fixed_pairs<N>::count, left = pairs - P0;
  if constexpr (left > 8) {
    v16 part[16], r;
    fixed_products16<N, P0>(V, part, std::make_index_sequence<16>{});
    reduce16(part, r);
    if constexpr (left >= 16)
      store16(dots + P0, r);
    else
      for (int k = 0; k < left; ++k)
        dots[P0 + k] = r[k];
    fixed_dots16<N, P0 + 16>(V, dots);
  } else if constexpr (left > 0) {
    v8 part[8], r;
    fixed_products8<N, P0>(V, part, std::make_index_sequence<8>{});
    reduce8(part, r);
    if constexpr (left == 8)
      store8(dots + P0, r);
    else
      for (int k = 0; k < left; ++k)
        dots[P0 + k] = r[k];
  }
}

template <int N>
[[gnu::always_inline]] inline void sample_dots16_fixed(const float* xs, const float* es, float* o) {
  v16 V[N];
  load16(V[0], xs);
  for (int k = 1; k < N; ++k)
    load16(V[k], es + (k - 1) * 16);
  store16(o, V[0]);
  fixed_dots16<N, 0>(V, o + 16);
}

// Row I of the backward: acc[j mod 4 (0 past the last multiple of 4)] += G_Ij v_j, j != I.
template <int N, int I, size_t... J>
[[gnu::always_inline]] inline void fixed_grad_row(const v16* V, const float* gd, v16* acc,
                                                  std::index_sequence<J...>) {
  constexpr int quad_end = N / 4 * 4;
  ((int(J) != I
      ? (void)(acc[int(J) < quad_end ? int(J) % 4 : 0] +=
               gd[I < int(J) ? pair_index(N, I, int(J)) : pair_index(N, int(J), I)] * V[J])
      : (void)0),
   ...);
}

template <int N, size_t... I>
[[gnu::always_inline]] inline void fixed_grads16(const v16* V, const float* g, float* dx,
                                                 float* demb, std::index_sequence<I...>) {
  const float* gd = g + 16;
  auto row = [&](auto i) {
    constexpr int r = decltype(i)::value;
    v16 acc[4] = {};
    if constexpr (r == 0)
      load16(acc[0], g);
    fixed_grad_row<N, r>(V, gd, acc, std::make_index_sequence<N>{});
    store16(r == 0 ? dx : demb + (r - 1) * 16, (acc[0] + acc[1]) + (acc[2] + acc[3]));
  };
  (row(std::integral_constant<int, int(I)>{}), ...);
}

template <int N>
[[gnu::always_inline]] inline void sample_grads16_fixed(const float* xs, const float* es,
                                                        const float* g, float* dx, float* demb) {
  v16 V[N];
  load16(V[0], xs);
  for (int k = 1; k < N; ++k)
    load16(V[k], es + (k - 1) * 16);
  fixed_grads16<N>(V, g, dx, demb, std::make_index_sequence<N>{});
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
[[gnu::target_clones("avx512f", "avx2", "default")]] void interaction_forward(
  int batch, int slots, int dim, const float* x, const float* emb, float* out) {
  const int n = slots + 1, width = interaction_output_size(slots, dim);
  if (dim == 16 && (n == 9 || n == 27)) {  // the compile-time paths (no scratch to allocate)
    for (int s = 0; s < batch; ++s) {
      const float* xs = x + static_cast<size_t>(s) * dim;
      const float* es = emb + static_cast<size_t>(s) * slots * dim;
      float* o = out + static_cast<size_t>(s) * width;
      if (n == 9)
        sample_dots16_fixed<9>(xs, es, o);
      else
        sample_dots16_fixed<27>(xs, es, o);
    }
    return;
  }
  std::vector<const float*> v(n);
  for (int s = 0; s < batch; ++s) {
    const float* xs = x + static_cast<size_t>(s) * dim;
    const float* es = emb + static_cast<size_t>(s) * slots * dim;
    float* o = out + static_cast<size_t>(s) * width;
    for (int k = 0; k < n; ++k)
      v[k] = vec(xs, es, k, dim);
    if (dim == 16) {
      sample_dots16(n, v.data(), o);
      continue;
    }
    std::memcpy(o, xs, sizeof(float) * dim);
    switch (dim) {
      case 8: sample_dots<1>(n, dim, v.data(), o + dim); break;
      case 32: sample_dots<4>(n, dim, v.data(), o + dim); break;
      default: sample_dots<0>(n, dim, v.data(), o + dim); break;
    }
  }
}

// Per sample, with G the symmetric n x n matrix of the dots' gradients (zero diagonal):
// d v_i = sum_j G_ij v_j (plus the pass-through gradient for v_0 = x), 8 dims at a time in one
// register. The sum over j runs in four interleaved accumulators (j mod 4), added at the end, so
// that the adds do not wait on each other.
[[gnu::target_clones("avx512f", "avx2", "default")]] void interaction_backward(
  int batch, int slots, int dim, const float* x, const float* emb, const float* dout, float* dx,
  float* demb) {
  const int n = slots + 1, width = interaction_output_size(slots, dim);
  if (dim == 16 && (n == 9 || n == 27)) {  // G straight from the dots' gradient, no scratch
    for (int s = 0; s < batch; ++s) {
      const float* xs = x + static_cast<size_t>(s) * dim;
      const float* es = emb + static_cast<size_t>(s) * slots * dim;
      const float* g = dout + static_cast<size_t>(s) * width;
      float* dxs = dx + static_cast<size_t>(s) * dim;
      float* des = demb + static_cast<size_t>(s) * slots * dim;
      if (n == 9)
        sample_grads16_fixed<9>(xs, es, g, dxs, des);
      else
        sample_grads16_fixed<27>(xs, es, g, dxs, des);
    }
    return;
  }
  std::vector<float> gm(static_cast<size_t>(n) * n, 0.0f);
  std::vector<const float*> v(n);
  std::vector<float*> to(n);
  for (int s = 0; s < batch; ++s) {
    const float* xs = x + static_cast<size_t>(s) * dim;
    const float* es = emb + static_cast<size_t>(s) * slots * dim;
    const float* g = dout + static_cast<size_t>(s) * width;
    const float* gd = g + dim;
    for (int i = 0; i < n; ++i) {
      v[i] = vec(xs, es, i, dim);
      for (int j = i + 1; j < n; ++j, ++gd)
        gm[i * n + j] = gm[j * n + i] = *gd;
    }
    if (dim == 16) {
      for (int i = 0; i < n; ++i)
        to[i] = i == 0 ? dx + static_cast<size_t>(s) * dim
                       : demb + (static_cast<size_t>(s) * slots + (i - 1)) * dim;
      sample_grads16(n, v.data(), gm.data(), g, to.data());
      continue;
    }
    for (int i = 0; i < n; ++i) {
      const float* gi = gm.data() + static_cast<size_t>(i) * n;
      float* to = i == 0 ? dx + static_cast<size_t>(s) * dim
                         : demb + (static_cast<size_t>(s) * slots + (i - 1)) * dim;
      const float* pass = i == 0 ? g : nullptr;
      switch (dim) {
        case 8: vector_grad<1>(n, dim, gi, v.data(), pass, to); break;
        case 32: vector_grad<4>(n, dim, gi, v.data(), pass, to); break;
        default: vector_grad<0>(n, dim, gi, v.data(), pass, to); break;
      }
    }
  }
}

}  // namespace satrap
