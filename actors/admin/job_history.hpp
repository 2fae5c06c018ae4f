// A job's progress over time for the dashboard's plots: one point per progress report (time,
// step, training loss, samples/s, running AUC, seconds per step, and validation AUC/logloss when
// the job reports them), and events (checkpoint written, restart) to mark on the time axis.
// Bounded: at `capacity` points every other point is dropped and from then on only every other
// report is kept (the stride doubles), so a long run keeps its whole span at an even, lower
// resolution; the newest report is always the last point. Events keep the newest
// `event_capacity`.
// Threading: none; its owner (the admin actor, or the embedded job's status under a mutex)
// serialises access.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace satrap {

struct job_history_sample {
  int64_t t_ms = 0;  // unix epoch milliseconds
  int64_t step = 0;
  double loss = NAN;
  double samples_per_sec = NAN;
  double running_auc = NAN;
  double validation_auc = NAN;  // NaN when the job does not report validation
  double validation_logloss = NAN;
  int64_t checkpoints = 0;  // counters: an increase becomes an event
  int64_t restarts = 0;
  std::string last_failure;  // why the newest restart happened
};

class job_history {
 public:
  explicit job_history(size_t capacity = 1024, size_t event_capacity = 256)
      : capacity_(capacity < 4 ? 4 : capacity), event_capacity_(event_capacity) {}

  void record(const job_history_sample& s);

  size_t size() const { return points_.size(); }

  // {"t_ms": [...], "step": [...], "loss": [...], "samples_per_sec": [...], "running_auc": [...],
  //  "step_seconds": [...], "validation_auc": [...], "validation_logloss": [...],
  //  "events": [{"t_ms", "step", "kind": "checkpoint"|"restart", "detail"}]}
  // Unknown values are null; the validation series are left out while no point has one.
  nlohmann::json to_json() const;

 private:
  struct point {
    int64_t t_ms;
    int64_t step;
    double loss, samples_per_sec, running_auc, step_seconds, validation_auc, validation_logloss;
  };
  struct event {
    int64_t t_ms;
    int64_t step;
    std::string kind;
    std::string detail;
  };
  size_t capacity_;
  size_t event_capacity_;
  std::vector<point> points_;
  std::deque<event> events_;
  int64_t stride_ = 1;  // keep every stride_-th report
  int64_t reports_ = 0;
  bool last_provisional_ = false;  // the last point is the newest report off the stride
  int64_t last_t_ms_ = -1;
  int64_t last_step_ = 0;
  int64_t checkpoints_ = 0;
  int64_t restarts_ = 0;
};

}  // namespace satrap
