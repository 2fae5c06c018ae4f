// Scoring a job's test split with an exported model, as `satrap predict` does: the split's rows
// in the job's batches (as the trainers evaluated them), regrouped into batches of the caller's
// size, each checked and scored, and the metrics over every row (AUC, log loss, NE).
// Threading: blocks the calling thread; on_row is called on it, in row order.
#pragma once

#include "models/data/batch.hpp"
#include "models/env.hpp"
#include "models/serving/exported_model.hpp"
#include "spec/job_data.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace satrap {

struct task_scores {
  double auc = 0;      // NaN when there were no rows
  double logloss = 0;  // NaN when there were no rows
  double ne = 0;       // logloss over the labels' entropy; NaN when every label is the same
};

struct scoring_result {
  int64_t rows = 0;
  double seconds = 0;  // scoring time, on env's steady clock
  double rows_per_sec = 0;
  double auc = 0;  // the first task's (the only one's with one label)
  double logloss = 0;
  double ne = 0;
  std::vector<task_scores> tasks;  // per task (the model's labels), in order
};

// Row `i` of batch `b` (its labels b.labels[i * b.tasks ..]) scored `logits` (one per task).
using scored_row = std::function<void(const batch& b, int i, const float* logits)>;

// The first `data.test_batches` job batches of `spec` (finalised; its training.batch_size) of
// the test split, scored `rows_at_once` at a time (0: the job's batch size). An input the model
// does not fit is an error naming its first row.
caf::expected<scoring_result> score_test_split(std::shared_ptr<const exported_model> model,
                                               const job_spec& spec, job_data& data,
                                               int rows_at_once, const scored_row& on_row,
                                               env& e = default_env());

}  // namespace satrap
