#include "models/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace satrap {

namespace {

double decay_factor(const lr_schedule& s, int64_t t) {
  switch (s.kind) {
    case lr_schedule_kind::constant:
    case lr_schedule_kind::warmup: return 1.0;
    case lr_schedule_kind::step:
      return std::pow(s.decay_rate, static_cast<double>(t / std::max<int64_t>(s.decay_steps, 1)));
    case lr_schedule_kind::exponential:
      return std::pow(s.decay_rate, static_cast<double>(t)
                                      / static_cast<double>(std::max<int64_t>(s.decay_steps, 1)));
    case lr_schedule_kind::cosine: {
      auto len = static_cast<double>(std::max<int64_t>(s.decay_steps, 1));
      auto x = std::min(static_cast<double>(t), len) / len;
      return s.min_factor + (1.0 - s.min_factor) * 0.5 * (1.0 + std::cos(std::numbers::pi * x));
    }
    case lr_schedule_kind::inverse_sqrt: {
      auto w = static_cast<double>(std::max<int64_t>(s.warmup_steps, 1));
      return std::sqrt(w / std::max(static_cast<double>(t + s.warmup_steps), w));
    }
  }
  return 1.0;
}

}  // namespace

double lr_factor(const lr_schedule& s, int64_t step) {
  if (step < 0)
    step = 0;
  if (step < s.warmup_steps)
    return static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps) * decay_factor(s, 0);
  return decay_factor(s, step - s.warmup_steps);
}

std::string lr_schedule_check(const lr_schedule& s, const std::string& what) {
  using k = lr_schedule_kind;
  if (s.kind == k::warmup && s.warmup_steps <= 0)
    return what + ".warmup_steps: expected at least 1 for schedule warmup";
  if ((s.kind == k::step || s.kind == k::exponential || s.kind == k::cosine) && s.decay_steps <= 0)
    return what + ".decay_steps: expected at least 1 for this schedule";
  if ((s.kind == k::step || s.kind == k::exponential)
      && !(s.decay_rate > 0.0 && s.decay_rate <= 1.0))
    return what + ".decay_rate: expected a number in (0, 1]";
  return "";
}

}  // namespace satrap
