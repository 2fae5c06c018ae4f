#include "actors/job_supervisor/best_model.hpp"

#include <algorithm>

namespace satrap {

bool best_model::is_validation_cut(int64_t c) const {
  if (policy_.validation_batches <= 0 || c <= 0 || c > policy_.steps)
    return false;
  if (c == policy_.steps)
    return true;
  return policy_.every > 0 && c % policy_.every == 0;
}

int64_t best_model::next_validation_cut(int64_t from) const {
  if (policy_.validation_batches <= 0 || from >= policy_.steps)
    return -1;
  if (policy_.every <= 0)
    return policy_.steps;
  return std::min((from / policy_.every + 1) * policy_.every, policy_.steps);
}

void best_model::on_trained(int64_t samples, double loss_sum) {
  samples_since_eval_ += samples;
  loss_since_eval_ += loss_sum;
}

double best_model::take_train_loss() {
  double loss = samples_since_eval_ > 0
                  ? loss_since_eval_ / static_cast<double>(samples_since_eval_)
                  : std::nan("");
  loss_since_eval_ = 0.0;
  samples_since_eval_ = 0;
  return loss;
}

bool best_model::record(std::string line) {
  history_.push_back(std::move(line));
  return history_.size() == 1;
}

double best_model::score(const eval_metrics& m) const {
  return policy_.early_stopping.metric == stop_metric::auc ? m.auc : -m.logloss;
}

best_model::verdict best_model::on_validated(int64_t c, const eval_metrics& m, double seconds,
                                             int64_t samples, const capnp_payload& dense) {
  verdict v;
  auto& es = policy_.early_stopping;
  v.improved = best_step_ < 0 || score(m) > score(best_) + es.min_delta;
  if (policy_.target_auc > 0.0 && m.auc >= policy_.target_auc && target_seconds_ < 0) {
    target_seconds_ = seconds;
    target_samples_ = samples;
    stopping_ = true;
    stop_reason_ = "target_auc";
    v.target_reached = true;
  }
  if (v.improved) {
    best_step_ = c;
    best_ = m;
    since_best_ = 0;
  } else if (++since_best_ >= es.patience && es.patience > 0 && !stopping_) {
    stopping_ = true;
    stop_reason_ = "early_stopping";
    v.early_stopped = true;
  }
  if (v.improved && keeps()) {
    best_dense_ = dense;
    // The best so far, and training goes on: keep it (at the last step the live model is it).
    v.snapshot = c < policy_.steps && !stopping_;
    if (!v.snapshot)
      best_snapshot_ = 0;  // the live model is the best: nothing to restore
  }
  return v;
}

uint64_t best_model::snapshot_kept(uint64_t sequence) {
  auto previous = best_snapshot_;
  best_snapshot_ = sequence;
  return previous;
}

bool best_model::must_restore(int64_t c) const {
  return keeps() && best_step_ >= 0 && best_step_ != c && best_snapshot_ > 0;
}

void best_model::roll_back() {
  loss_since_eval_ = 0.0;
  samples_since_eval_ = 0;
  stopping_ = false;
  stop_reason_.clear();
}

}  // namespace satrap
