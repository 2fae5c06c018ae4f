// The AVX2 + F16C kernels. Compiled for any x86-64 (target attributes, no -mavx2), used only when
// __builtin_cpu_supports says the CPU has them. Same operation order as the scalar kernels (no
// FMA, rowwise sums in the scalar lane order), so the results are bit-identical.
#include "models/embedding/sparse_kernels.hpp"

#include <cmath>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SATRAP_AVX2 __attribute__((target("avx2,f16c")))

namespace satrap {

namespace {

struct avx2_consts {
  __m256 lr, eps, wd;
};

SATRAP_AVX2 inline __m256 decayed8(__m256 g, __m256 w, __m256 wd) {
  return _mm256_add_ps(g, _mm256_mul_ps(wd, w));
}

SATRAP_AVX2 void sgd8(const step_params& p, float* w, const float* g) {
  __m256 lr = _mm256_set1_ps(p.lr), wd = _mm256_set1_ps(p.weight_decay);
  int d = 0;
  for (; d + 8 <= p.dim; d += 8) {
    __m256 wv = _mm256_loadu_ps(w + d);
    __m256 ge = decayed8(_mm256_loadu_ps(g + d), wv, wd);
    _mm256_storeu_ps(w + d, _mm256_sub_ps(wv, _mm256_mul_ps(lr, ge)));
  }
  for (; d < p.dim; ++d)
    w[d] -= p.lr * (g[d] + p.weight_decay * w[d]);
}

SATRAP_AVX2 void adagrad8(const step_params& p, float* w, float* acc, const float* g) {
  __m256 lr = _mm256_set1_ps(p.lr), eps = _mm256_set1_ps(p.eps),
         wd = _mm256_set1_ps(p.weight_decay);
  int d = 0;
  for (; d + 8 <= p.dim; d += 8) {
    __m256 wv = _mm256_loadu_ps(w + d);
    __m256 ge = decayed8(_mm256_loadu_ps(g + d), wv, wd);
    __m256 a = _mm256_add_ps(_mm256_loadu_ps(acc + d), _mm256_mul_ps(ge, ge));
    _mm256_storeu_ps(acc + d, a);
    __m256 step = _mm256_div_ps(_mm256_mul_ps(lr, ge), _mm256_add_ps(_mm256_sqrt_ps(a), eps));
    _mm256_storeu_ps(w + d, _mm256_sub_ps(wv, step));
  }
  for (; d < p.dim; ++d) {
    float ge = g[d] + p.weight_decay * w[d];
    acc[d] += ge * ge;
    w[d] -= p.lr * ge / (std::sqrt(acc[d]) + p.eps);
  }
}

SATRAP_AVX2 void rowwise_adagrad8(const step_params& p, float* w, float* acc, const float* g) {
  __m256 wd = _mm256_set1_ps(p.weight_decay), sq = _mm256_setzero_ps();
  int d = 0, dim8 = p.dim & ~7;
  for (; d < dim8; d += 8) {
    __m256 ge = decayed8(_mm256_loadu_ps(g + d), _mm256_loadu_ps(w + d), wd);
    sq = _mm256_add_ps(sq, _mm256_mul_ps(ge, ge));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sq);
  float sum = dim8 ? lanes8_sum(lanes) : 0.0f;
  for (; d < p.dim; ++d) {
    float ge = g[d] + p.weight_decay * w[d];
    sum += ge * ge;
  }
  acc[0] += sum / static_cast<float>(p.dim);
  float denom = std::sqrt(acc[0]) + p.eps;
  __m256 lr = _mm256_set1_ps(p.lr), dv = _mm256_set1_ps(denom);
  for (d = 0; d < dim8; d += 8) {
    __m256 wv = _mm256_loadu_ps(w + d);
    __m256 ge = decayed8(_mm256_loadu_ps(g + d), wv, wd);
    _mm256_storeu_ps(w + d, _mm256_sub_ps(wv, _mm256_div_ps(_mm256_mul_ps(lr, ge), dv)));
  }
  for (; d < p.dim; ++d)
    w[d] -= p.lr * (g[d] + p.weight_decay * w[d]) / denom;
}

SATRAP_AVX2 void adam8(const step_params& p, float* w, float* state, const float* g) {
  float* m = state;
  float* v = state + p.dim;
  uint32_t t;
  std::memcpy(&t, state + 2 * p.dim, 4);
  ++t;
  std::memcpy(state + 2 * p.dim, &t, 4);
  auto bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(p.beta1), t));
  auto bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(p.beta2), t));
  float c1 = 1.0f - p.beta1, c2 = 1.0f - p.beta2;
  __m256 b1 = _mm256_set1_ps(p.beta1), b2 = _mm256_set1_ps(p.beta2), c1v = _mm256_set1_ps(c1),
         c2v = _mm256_set1_ps(c2), bc1v = _mm256_set1_ps(bc1), bc2v = _mm256_set1_ps(bc2),
         lr = _mm256_set1_ps(p.lr), eps = _mm256_set1_ps(p.eps),
         wd = _mm256_set1_ps(p.weight_decay);
  int d = 0;
  for (; d + 8 <= p.dim; d += 8) {
    __m256 wv = _mm256_loadu_ps(w + d);
    __m256 ge = decayed8(_mm256_loadu_ps(g + d), wv, wd);
    __m256 mv = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + d)), _mm256_mul_ps(c1v, ge));
    __m256 vv = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + d)),
                              _mm256_mul_ps(c2v, _mm256_mul_ps(ge, ge)));
    _mm256_storeu_ps(m + d, mv);
    _mm256_storeu_ps(v + d, vv);
    __m256 num = _mm256_mul_ps(lr, _mm256_div_ps(mv, bc1v));
    __m256 den = _mm256_add_ps(_mm256_sqrt_ps(_mm256_div_ps(vv, bc2v)), eps);
    _mm256_storeu_ps(w + d, _mm256_sub_ps(wv, _mm256_div_ps(num, den)));
  }
  for (; d < p.dim; ++d) {
    float ge = g[d] + p.weight_decay * w[d];
    m[d] = p.beta1 * m[d] + c1 * ge;
    v[d] = p.beta2 * v[d] + c2 * (ge * ge);
    w[d] -= p.lr * (m[d] / bc1) / (std::sqrt(v[d] / bc2) + p.eps);
  }
}

SATRAP_AVX2 void clip8(const step_params& p, float* w) {
  if (p.clip <= 0.0f)
    return;
  __m256 hi = _mm256_set1_ps(p.clip), lo = _mm256_set1_ps(-p.clip);
  int d = 0;
  for (; d + 8 <= p.dim; d += 8)
    _mm256_storeu_ps(w + d, _mm256_min_ps(_mm256_max_ps(_mm256_loadu_ps(w + d), lo), hi));
  for (; d < p.dim; ++d)
    w[d] = w[d] < -p.clip ? -p.clip : (w[d] > p.clip ? p.clip : w[d]);
}

SATRAP_AVX2 void step_avx2(const step_params& p, float* w, float* state, const float* g) {
  switch (p.kind) {
    case sparse_optimizer_kind::sgd: sgd8(p, w, g); break;
    case sparse_optimizer_kind::adagrad: adagrad8(p, w, state, g); break;
    case sparse_optimizer_kind::rowwise_adagrad: rowwise_adagrad8(p, w, state, g); break;
    case sparse_optimizer_kind::adam: adam8(p, w, state, g); break;
    case sparse_optimizer_kind::ftrl: ftrl_step_scalar(p, w, state, g); break;
  }
  clip8(p, w);
}

SATRAP_AVX2 void to_f32_avx2(const uint16_t* in, float* out, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i)
    out[i] = _cvtsh_ss(in[i]);
}

SATRAP_AVX2 void to_f16_avx2(const float* in, uint16_t* out, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i)
    out[i] = _cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT);
}

}  // namespace

const sparse_kernels* sparse_kernels_avx2() {
  static const bool present = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  static const sparse_kernels k{"avx2", step_avx2, to_f32_avx2, to_f16_avx2};
  return present ? &k : nullptr;
}

}  // namespace satrap

#else  // not x86: scalar only

namespace satrap {
const sparse_kernels* sparse_kernels_avx2() { return nullptr; }
}  // namespace satrap

#endif
