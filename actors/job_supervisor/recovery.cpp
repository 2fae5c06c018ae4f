#include "actors/job_supervisor/recovery.hpp"

#include <algorithm>

namespace satrap {

void recovery::start(size_t trainers, int64_t first_step) {
  applied_steps_.assign(trainers, first_step);
  recovering_ = false;
}

recovery::decision recovery::on_failure(uint64_t gen, uint64_t current, bool running,
                                        const std::string& reason, time_point now, int64_t resume) {
  decision d;
  if (gen != current || recovering_ || !running)
    return d;
  if (finishing_) {  // trained and evaluated: nothing to recover
    d.what = action::after_training;
    return d;
  }
  recovering_ = true;
  failures_.push_back(reason);
  if (!intensity_ || !intensity_->allow(now)) {
    d.what = action::give_up;
    return d;
  }
  // Everything applied after the newest checkpoint is rolled back and trained again: per
  // trainer, the step reached (applied on the shards) less the checkpoint's step; one batch each.
  // A step of this generation whose `applied` arrives after this failure is counted on arrival.
  for (auto& s : applied_steps_) {
    s = std::max(s, resume);
    d.replayed += s - resume;
  }
  rolled_back_generation_ = current;
  rolled_back_to_ = applied_steps_;
  applied_steps_.assign(applied_steps_.size(), resume);
  d.what = action::restart;
  return d;
}

int64_t recovery::on_applied(uint64_t gen, uint64_t current, int64_t step, int32_t rank) {
  auto r = static_cast<size_t>(rank);
  if (gen == current && !recovering_ && r < applied_steps_.size()) {
    applied_steps_[r] = std::max(applied_steps_[r], step + 1);
  } else if (gen == rolled_back_generation_ && r < rolled_back_to_.size()
             && step + 1 > rolled_back_to_[r]) {
    // Applied before the failure, reported after it: rolled back too.
    auto more = step + 1 - rolled_back_to_[r];
    rolled_back_to_[r] = step + 1;
    return more;
  }
  return 0;
}

}  // namespace satrap
