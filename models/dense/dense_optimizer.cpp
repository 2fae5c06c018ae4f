#include "models/dense/dense_optimizer.hpp"
#include "models/assert.hpp"

#include <cassert>
#include <algorithm>
#include <cmath>

namespace satrap {

namespace {

// The update loops, vectorised: no errno for sqrt (models/CMakeLists.txt compiles this file with
// -fno-math-errno, so sqrt becomes a vector instruction), restrict pointers, an AVX2 clone. sqrt
// and division are correctly rounded in every clone and nothing is contracted into FMAs
// (-std=c++20), so both clones give the same bits as the scalar loop did.
[[gnu::target_clones("avx2", "default")]] void adagrad_step(size_t n, float lr, float wd, float eps,
                                                            float* __restrict w,
                                                            const float* __restrict grad,
                                                            float* __restrict m) {
  for (size_t i = 0; i < n; ++i) {
    float g = grad[i] + wd * w[i];
    m[i] += g * g;
    w[i] -= lr * g / (std::sqrt(m[i]) + eps);
  }
}

[[gnu::target_clones("avx2", "default")]] void adam_step(size_t n, float lr, float wd, float eps,
                                                         float b1, float b2, float c1, float c2,
                                                         float* __restrict w,
                                                         const float* __restrict grad,
                                                         float* __restrict m, float* __restrict v) {
  for (size_t i = 0; i < n; ++i) {
    float g = grad[i] + wd * w[i];
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
  }
}

}  // namespace

dense_optimizer::dense_optimizer(const dense_optimizer_options& options, size_t params)
    : options_(options), params_(params) {
  if (options.kind != dense_optimizer_kind::sgd)
    m_.assign(params, 0.0f);
  if (options.kind == dense_optimizer_kind::adam)
    v_.assign(params, 0.0f);
}

bool dense_optimizer::set_state(std::span<const float> m, std::span<const float> v, int64_t steps) {
  if (m.size() != m_.size() || v.size() != v_.size())
    return false;
  m_.assign(m.begin(), m.end());
  v_.assign(v.begin(), v.end());
  steps_ = steps;
  return true;
}

bool dense_optimizer::set_ema(std::span<const float> ema) {
  if (!ema.empty() && (ema.size() != params_ || options_.ema_decay <= 0.0f))
    return false;
  ema_.assign(ema.begin(), ema.end());
  return true;
}

float dense_optimizer::current_learning_rate() const {
  return static_cast<float>(options_.learning_rate * lr_factor(options_.schedule, steps_));
}

void dense_optimizer::step(std::span<float> params, std::span<const float> grads) {
  SATRAP_ASSERT(params.size() == grads.size());
  const float lr = current_learning_rate();
  ++steps_;
  const float wd = options_.weight_decay, eps = options_.eps;
  const size_t n = params.size();
  switch (options_.kind) {
    case dense_optimizer_kind::sgd:
      for (size_t i = 0; i < n; ++i)
        params[i] -= lr * (grads[i] + wd * params[i]);
      break;
    case dense_optimizer_kind::adagrad:
      SATRAP_ASSERT(m_.size() == n);
      adagrad_step(n, lr, wd, eps, params.data(), grads.data(), m_.data());
      break;
    case dense_optimizer_kind::adam: {
      SATRAP_ASSERT(m_.size() == n && v_.size() == n);
      const float b1 = options_.beta1, b2 = options_.beta2;
      const float c1 = 1.0f - static_cast<float>(std::pow(double{b1}, double(steps_)));
      const float c2 = 1.0f - static_cast<float>(std::pow(double{b2}, double(steps_)));
      adam_step(n, lr, wd, eps, b1, b2, c1, c2, params.data(), grads.data(), m_.data(), v_.data());
      break;
    }
  }
  if (options_.ema_decay > 0.0f) {
    if (ema_.empty()) {
      ema_.assign(params.begin(), params.end());
    } else {
      SATRAP_ASSERT(ema_.size() == n);
      // The decay warms up as TensorFlow's ExponentialMovingAverage with num_updates does, so a
      // short job averages its last steps, not its first: min(d, (1 + t) / (10 + t)).
      const float t = static_cast<float>(steps_);
      const float d = std::min(options_.ema_decay, (1.0f + t) / (10.0f + t)), e = 1.0f - d;
      for (size_t i = 0; i < n; ++i)
        ema_[i] = d * ema_[i] + e * params[i];
    }
  }
}

}  // namespace satrap
