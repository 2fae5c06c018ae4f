// Optimizers for the flat dense parameter vector: SGD, Adagrad, Adam (with optional L2 decay).
// Threading: not thread-safe; one owner (it holds per-parameter state).
#pragma once

#include "models/lr_schedule.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace satrap {

enum class dense_optimizer_kind { sgd, adagrad, adam };

// Dense optimizer settings. weight_decay is classic L2: g += weight_decay * w before the step.
struct dense_optimizer_options {
  dense_optimizer_kind kind = dense_optimizer_kind::adam;  // which update rule
  float learning_rate = 0.001f;                            // step size
  float eps = 1e-8f;                                       // denominator guard (Adagrad, Adam)
  float beta1 = 0.9f;                                      // Adam first-moment decay
  float beta2 = 0.999f;                                    // Adam second-moment decay
  float weight_decay = 0.0f;                               // L2 coefficient
  lr_schedule schedule;                                    // learning_rate x lr_factor(step)
  // > 0: keep an exponential moving average of the weights, ema = d_t * ema + (1 - d_t) * w after
  // step t (the first step's weights start it), d_t = min(ema_decay, (1 + t) / (10 + t)) so that
  // a short run averages its last steps; evaluation reads it instead of w (Polyak-style
  // averaging against the last steps' noise). 0: off, no copy kept.
  float ema_decay = 0.0f;
};

class dense_optimizer {
 public:
  dense_optimizer(const dense_optimizer_options& options, size_t params);
  // One step with lr = learning_rate x lr_factor(schedule, steps before it): sgd: w -= lr*g; adagrad: acc += g*g, w -= lr*g/(sqrt(acc)+eps);
  // adam: bias-corrected m, v; w -= lr*mhat/(sqrt(vhat)+eps).
  void step(std::span<float> params, std::span<const float> grads);

  const dense_optimizer_options& options() const { return options_; }
  int64_t steps() const { return steps_; }
  // The learning rate of the next step.
  float current_learning_rate() const;

  // Per-parameter state, for checkpoints: m (Adagrad accumulator or Adam first moment; empty for
  // SGD) and v (Adam second moment). set_state checks the sizes and returns false on a mismatch.
  std::span<const float> m() const { return m_; }
  std::span<const float> v() const { return v_; }
  bool set_state(std::span<const float> m, std::span<const float> v, int64_t steps);
  // The weights' moving average (ema_decay > 0 and at least one step taken; else empty), and its
  // restore from a checkpoint: false when ema is neither empty nor the optimizer's size.
  std::span<const float> ema() const { return ema_; }
  bool set_ema(std::span<const float> ema);

 private:
  dense_optimizer_options options_;
  std::vector<float> m_;    // Adagrad accumulator or Adam first moment
  std::vector<float> v_;    // Adam second moment
  std::vector<float> ema_;  // ema_decay > 0: the weights' moving average (empty before a step)
  size_t params_ = 0;
  int64_t steps_ = 0;
};

}  // namespace satrap
