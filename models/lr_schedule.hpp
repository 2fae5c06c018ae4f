// Learning-rate schedules: the factor the base learning rate is multiplied by at a step.
//   constant      1
//   warmup        linear warm-up over warmup_steps, then 1 (any kind may also set warmup_steps)
//   step          decay_rate ^ floor(t / decay_steps)
//   exponential   decay_rate ^ (t / decay_steps)
//   cosine        min_factor + (1 - min_factor) * (1 + cos(pi * min(t, decay_steps) / decay_steps)) / 2
//   inverse_sqrt  sqrt(max(warmup_steps, 1) / max(step, warmup_steps, 1)) (step, not t)
// where t counts steps after the warm-up (t = step - warmup_steps). During the warm-up (step <
// warmup_steps) the factor is (step + 1) / warmup_steps times the factor at t = 0.
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace satrap {

enum class lr_schedule_kind { constant, warmup, step, exponential, cosine, inverse_sqrt };

struct lr_schedule {
  lr_schedule_kind kind = lr_schedule_kind::constant;
  int64_t warmup_steps = 0;  // linear warm-up steps (0: none)
  int64_t decay_steps = 0;   // step / exponential: the period; cosine: the length (0: invalid)
  double decay_rate = 0.5;   // step / exponential: the factor per period
  double min_factor = 0.0;   // cosine: the floor, as a fraction of the base rate
};

// The factor at `step` (0-based: the step being taken).
double lr_factor(const lr_schedule& s, int64_t step);

// "" or what is wrong with the schedule's parameters (`what` names it, e.g. the key prefix).
std::string lr_schedule_check(const lr_schedule& s, const std::string& what);

}  // namespace satrap
