#include "actors/admin/job_history.hpp"

#include <algorithm>

namespace satrap {

void job_history::record(const job_history_sample& s) {
  double step_seconds = NAN;
  if (last_t_ms_ >= 0 && s.step > last_step_)
    step_seconds =
      static_cast<double>(s.t_ms - last_t_ms_) / 1000.0 / static_cast<double>(s.step - last_step_);
  auto add_event = [&](const char* kind, std::string detail) {
    events_.push_back({s.t_ms, s.step, kind, std::move(detail)});
    while (events_.size() > event_capacity_)
      events_.pop_front();
  };
  if (s.checkpoints > checkpoints_)
    add_event("checkpoint", "checkpoint " + std::to_string(s.checkpoints));
  if (s.restarts > restarts_)
    add_event("restart", s.last_failure);
  checkpoints_ = std::max(checkpoints_, s.checkpoints);
  restarts_ = std::max(restarts_, s.restarts);
  if (last_provisional_) {
    points_.pop_back();
    last_provisional_ = false;
  }
  if (points_.size() >= capacity_) {
    // Halve the resolution: keep every other point, and every other report from now on.
    std::vector<point> kept;
    kept.reserve(capacity_ / 2 + 1);
    for (size_t i = 0; i < points_.size(); i += 2)
      kept.push_back(points_[i]);
    points_ = std::move(kept);
    stride_ *= 2;
  }
  points_.push_back({s.t_ms, s.step, s.loss, s.samples_per_sec, s.running_auc, step_seconds,
                     s.validation_auc, s.validation_logloss});
  last_provisional_ = reports_++ % stride_ != 0;
  last_t_ms_ = s.t_ms;
  last_step_ = s.step;
}

nlohmann::json job_history::to_json() const {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json t = nlohmann::json::array(), step = nlohmann::json::array(),
                 loss = nlohmann::json::array(), sps = nlohmann::json::array(),
                 auc = nlohmann::json::array(), secs = nlohmann::json::array(),
                 vauc = nlohmann::json::array(), vloss = nlohmann::json::array();
  bool validation = false;
  for (auto& p : points_) {
    t.push_back(p.t_ms);
    step.push_back(p.step);
    loss.push_back(num(p.loss));
    sps.push_back(num(p.samples_per_sec));
    auc.push_back(num(p.running_auc));
    secs.push_back(num(p.step_seconds));
    vauc.push_back(num(p.validation_auc));
    vloss.push_back(num(p.validation_logloss));
    validation =
      validation || std::isfinite(p.validation_auc) || std::isfinite(p.validation_logloss);
  }
  nlohmann::json j = {{"t_ms", t},          {"step", step},
                      {"loss", loss},       {"samples_per_sec", sps},
                      {"running_auc", auc}, {"step_seconds", secs}};
  if (validation) {
    j["validation_auc"] = vauc;
    j["validation_logloss"] = vloss;
  }
  nlohmann::json ev = nlohmann::json::array();
  for (auto& e : events_)
    ev.push_back({{"t_ms", e.t_ms}, {"step", e.step}, {"kind", e.kind}, {"detail", e.detail}});
  j["events"] = ev;
  return j;
}

}  // namespace satrap
