// Evaluation metrics: exact AUC (mid-ranks for ties), mean log loss, NE, calibration, grouped
// AUC, a windowed running AUC.
// Threading: free functions are pure; running_auc is not thread-safe (one owner).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace satrap {

float sigmoid(float x);

// Area under the ROC curve; ties get mid-ranks; 0.5 when one class is absent.
double auc_exact(std::span<const float> scores, std::span<const float> labels);

// Mean binary cross-entropy of sigmoid(logits), computed stably from the logits.
double logloss_from_logits(std::span<const float> logits, std::span<const float> labels);

// The evaluation metrics of one split. NE is the log loss over the entropy of the base rate
// (1.0 = no better than predicting the click rate); calibration is the mean predicted probability
// over the mean label (1.0 = calibrated). GAUC is the AUC of each group (e.g. each user) that has
// both classes, weighted by the group's samples; NaN when no group has both classes or no groups
// were given.
struct eval_metrics {
  double auc = 0.5;
  double logloss = 0.0;
  double ne = 0.0;
  double calibration = 0.0;
  double gauc = 0.0;  // NaN without groups
  int64_t samples = 0;
};

// Metrics of `logits` against `labels`; `groups` empty (no GAUC) or one group key per sample.
eval_metrics compute_eval_metrics(std::span<const float> logits, std::span<const float> labels,
                                  std::span<const uint64_t> groups = {});

// Several tasks: logits and labels are samples x tasks, sample-major; one eval_metrics per task
// (groups: one key per sample, as above).
std::vector<eval_metrics> compute_task_metrics(std::span<const float> logits,
                                               std::span<const float> labels,
                                               std::span<const uint64_t> groups, int tasks);

// One figure for several tasks: each field the task-weighted mean of the tasks' (weights empty:
// equal weights); samples is the first task's. One task: that task's metrics.
eval_metrics combine_task_metrics(const std::vector<eval_metrics>& per_task,
                                  std::span<const float> task_weights);

// Column `task` of a samples x tasks matrix.
std::vector<float> task_column(std::span<const float> values, int tasks, int task);

// Impression-weighted grouped AUC (see eval_metrics).
double grouped_auc(std::span<const float> scores, std::span<const float> labels,
                   std::span<const uint64_t> groups);

// AUC over the last `window` (score, label) pairs. value() sorts the whole window, so with
// `refresh` > 1 it recomputes only once at least `refresh` pairs were added since it last did
// (and always the first time), returning the last figure in between: a progress indicator need
// not re-sort 100,000 predictions for every 10,000 new ones.
class running_auc {
 public:
  explicit running_auc(size_t window, size_t refresh = 1);
  void add(std::span<const float> scores, std::span<const float> labels);
  double value();
  size_t count() const { return scores_.size(); }

 private:
  size_t window_;
  size_t refresh_;
  size_t next_ = 0;     // ring position once full
  size_t added_since_;  // pairs added since the last computation (starts at refresh: compute)
  double last_ = 0.5;
  std::vector<float> scores_;
  std::vector<float> labels_;
};

}  // namespace satrap
