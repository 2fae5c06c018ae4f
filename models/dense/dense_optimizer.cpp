#include "models/dense/dense_optimizer.hpp"
#include "models/assert.hpp"

#include <cassert>
#include <cmath>

namespace satrap {

dense_optimizer::dense_optimizer(const dense_optimizer_options& options, size_t params)
    : options_(options) {
  if (options.kind != dense_optimizer_kind::sgd) m_.assign(params, 0.0f);
  if (options.kind == dense_optimizer_kind::adam) v_.assign(params, 0.0f);
}

bool dense_optimizer::set_state(std::span<const float> m, std::span<const float> v,
                                int64_t steps) {
  if (m.size() != m_.size() || v.size() != v_.size())
    return false;
  m_.assign(m.begin(), m.end());
  v_.assign(v.begin(), v.end());
  steps_ = steps;
  return true;
}

void dense_optimizer::step(std::span<float> params, std::span<const float> grads) {
  SATRAP_ASSERT(params.size() == grads.size());
  ++steps_;
  const float lr = options_.learning_rate, wd = options_.weight_decay, eps = options_.eps;
  const size_t n = params.size();
  switch (options_.kind) {
    case dense_optimizer_kind::sgd:
      for (size_t i = 0; i < n; ++i) params[i] -= lr * (grads[i] + wd * params[i]);
      break;
    case dense_optimizer_kind::adagrad:
      SATRAP_ASSERT(m_.size() == n);
      for (size_t i = 0; i < n; ++i) {
        float g = grads[i] + wd * params[i];
        m_[i] += g * g;
        params[i] -= lr * g / (std::sqrt(m_[i]) + eps);
      }
      break;
    case dense_optimizer_kind::adam: {
      SATRAP_ASSERT(m_.size() == n && v_.size() == n);
      const float b1 = options_.beta1, b2 = options_.beta2;
      const float c1 = 1.0f - static_cast<float>(std::pow(double{b1}, double(steps_)));
      const float c2 = 1.0f - static_cast<float>(std::pow(double{b2}, double(steps_)));
      for (size_t i = 0; i < n; ++i) {
        float g = grads[i] + wd * params[i];
        m_[i] = b1 * m_[i] + (1.0f - b1) * g;
        v_[i] = b2 * v_[i] + (1.0f - b2) * g * g;
        params[i] -= lr * (m_[i] / c1) / (std::sqrt(v_[i] / c2) + eps);
      }
      break;
    }
  }
}

}  // namespace satrap
