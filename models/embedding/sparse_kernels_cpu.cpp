// The scalar kernels: the specification of every sparse optimizer step.
#include "models/embedding/sparse_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/embedding/fp16.hpp"

namespace satrap {

step_params step_params::of(const embedding_options& o) {
  step_params p;
  p.kind = o.optimizer;
  p.dim = o.dim;
  p.lr = o.learning_rate;
  p.eps = o.eps;
  p.beta1 = o.beta1;
  p.beta2 = o.beta2;
  p.ftrl_beta = o.ftrl_beta;
  p.ftrl_l1 = o.ftrl_l1;
  p.ftrl_l2 = o.ftrl_l2;
  p.weight_decay = o.weight_decay;
  p.clip = o.clip;
  return p;
}

namespace {

float decayed(const step_params& p, float g, float w) { return g + p.weight_decay * w; }

void clip_row(const step_params& p, float* w) {
  if (p.clip <= 0.0f)
    return;
  for (int d = 0; d < p.dim; ++d)
    w[d] = std::min(std::max(w[d], -p.clip), p.clip);
}

void sgd(const step_params& p, float* w, const float* g) {
  for (int d = 0; d < p.dim; ++d)
    w[d] -= p.lr * decayed(p, g[d], w[d]);
}

void adagrad(const step_params& p, float* w, float* acc, const float* g) {
  for (int d = 0; d < p.dim; ++d) {
    float ge = decayed(p, g[d], w[d]);
    acc[d] += ge * ge;
    w[d] -= p.lr * ge / (std::sqrt(acc[d]) + p.eps);
  }
}

void rowwise_adagrad(const step_params& p, float* w, float* acc, const float* g) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int d = 0, dim8 = p.dim & ~7;
  for (; d < dim8; ++d) {
    float ge = decayed(p, g[d], w[d]);
    lanes[d & 7] += ge * ge;
  }
  float sum = dim8 ? lanes8_sum(lanes) : 0.0f;
  for (; d < p.dim; ++d) {
    float ge = decayed(p, g[d], w[d]);
    sum += ge * ge;
  }
  acc[0] += sum / static_cast<float>(p.dim);
  float denom = std::sqrt(acc[0]) + p.eps;
  for (d = 0; d < p.dim; ++d)
    w[d] -= p.lr * decayed(p, g[d], w[d]) / denom;
}

void adam(const step_params& p, float* w, float* state, const float* g) {
  float* m = state;
  float* v = state + p.dim;
  uint32_t t;
  std::memcpy(&t, state + 2 * p.dim, 4);
  ++t;
  std::memcpy(state + 2 * p.dim, &t, 4);
  auto bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(p.beta1), t));
  auto bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(p.beta2), t));
  float c1 = 1.0f - p.beta1, c2 = 1.0f - p.beta2;
  for (int d = 0; d < p.dim; ++d) {
    float ge = decayed(p, g[d], w[d]);
    m[d] = p.beta1 * m[d] + c1 * ge;
    v[d] = p.beta2 * v[d] + c2 * (ge * ge);
    w[d] -= p.lr * (m[d] / bc1) / (std::sqrt(v[d] / bc2) + p.eps);
  }
}

void step_scalar(const step_params& p, float* w, float* state, const float* g) {
  switch (p.kind) {
    case sparse_optimizer_kind::sgd: sgd(p, w, g); break;
    case sparse_optimizer_kind::adagrad: adagrad(p, w, state, g); break;
    case sparse_optimizer_kind::rowwise_adagrad: rowwise_adagrad(p, w, state, g); break;
    case sparse_optimizer_kind::adam: adam(p, w, state, g); break;
    case sparse_optimizer_kind::ftrl: ftrl_step_scalar(p, w, state, g); break;
  }
  clip_row(p, w);
}

void to_f32_scalar(const uint16_t* in, float* out, int n) {
  for (int i = 0; i < n; ++i)
    out[i] = f16_to_f32(in[i]);
}

void to_f16_scalar(const float* in, uint16_t* out, int n) {
  for (int i = 0; i < n; ++i)
    out[i] = f32_to_f16(in[i]);
}

}  // namespace

void ftrl_step_scalar(const step_params& p, float* w, float* state, const float* g) {
  float* z = state;
  float* n = state + p.dim;
  for (int d = 0; d < p.dim; ++d) {
    float ge = decayed(p, g[d], w[d]);
    float n_new = n[d] + ge * ge;
    float sigma = (std::sqrt(n_new) - std::sqrt(n[d])) / p.lr;
    z[d] += ge - sigma * w[d];
    n[d] = n_new;
    if (std::abs(z[d]) <= p.ftrl_l1) {
      w[d] = 0.0f;
    } else {
      float shrunk = z[d] - std::copysign(p.ftrl_l1, z[d]);
      w[d] = -shrunk / ((p.ftrl_beta + std::sqrt(n_new)) / p.lr + p.ftrl_l2);
    }
  }
}

const sparse_kernels& sparse_kernels_scalar() {
  static const sparse_kernels k{"scalar", step_scalar, to_f32_scalar, to_f16_scalar};
  return k;
}

const sparse_kernels& sparse_kernels_select(simd_choice choice) {
  if (choice == simd_choice::automatic)
    if (const auto* k = sparse_kernels_avx2())
      return *k;
  return sparse_kernels_scalar();
}

}  // namespace satrap
