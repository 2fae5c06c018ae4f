#include "serving/batch_scoring.hpp"

#include "models/metrics.hpp"
#include "runtime/error.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace satrap {

namespace {

// Rows [first, first + n) of the test split, gathered from the job's batches of `jbs` rows.
batch gather_rows(job_data& data, const exported_model& m, int64_t first, int n, int jbs) {
  batch b;
  b.slots = m.slots();
  b.dense_features = m.dense_features();
  b.tasks = m.tasks();
  b.offsets.push_back(0);
  for (int64_t k = first / jbs; k * jbs < first + n; ++k) {
    auto jb = data.source->make_batch(data_split::test, k, jbs);
    for (int i = 0; i < jb.size; ++i) {
      auto row = k * jbs + i;
      if (row < first || row >= first + n)
        continue;
      for (int s = 0; s < jb.slots; ++s) {
        auto bag = static_cast<size_t>(i) * jb.slots + s;
        b.ids.insert(b.ids.end(), jb.ids.begin() + jb.offsets[bag],
                     jb.ids.begin() + jb.offsets[bag + 1]);
        if (!jb.weights.empty())
          b.weights.insert(b.weights.end(), jb.weights.begin() + jb.offsets[bag],
                           jb.weights.begin() + jb.offsets[bag + 1]);
        b.offsets.push_back(static_cast<uint32_t>(b.ids.size()));
      }
      b.dense.insert(b.dense.end(), jb.dense.begin() + i * jb.dense_features,
                     jb.dense.begin() + (i + 1) * jb.dense_features);
      b.labels.insert(b.labels.end(), jb.labels.begin() + i * jb.tasks,
                      jb.labels.begin() + (i + 1) * jb.tasks);
      ++b.size;
    }
  }
  return b;
}

}  // namespace

caf::expected<scoring_result> score_test_split(std::shared_ptr<const exported_model> model,
                                               const job_spec& spec, job_data& data,
                                               int rows_at_once, const scored_row& on_row, env& e) {
  auto& m = *model;
  const int jbs = spec.training.batch_size;
  const int bs = rows_at_once > 0 ? rows_at_once : jbs;
  model_scorer scorer(model);
  const int tasks = m.tasks();
  std::vector<float> logits;
  std::vector<std::vector<float>> labels(tasks), all_logits(tasks);
  auto started = e.steady_now();
  scoring_result res;
  int64_t total = data.source->samples(data_split::test);
  int64_t want = data.test_batches * int64_t{jbs};
  if (total >= 0)
    want = std::min(want, total);
  for (int64_t first = 0; first < want; first += bs) {
    auto n = static_cast<int>(std::min<int64_t>(bs, want - first));
    batch b = bs == jbs ? data.source->make_batch(data_split::test, first / jbs, jbs)
                        : gather_rows(data, m, first, n, jbs);
    n = std::min(n, b.size);
    if (n <= 0)
      break;
    auto err = check_score_input(m, b.size, b.offsets, b.ids, b.weights, b.dense);
    if (err.empty() && b.tasks != tasks)
      err =
        "the data has " + std::to_string(b.tasks) + " labels, the model " + std::to_string(tasks);
    if (!err.empty())
      return make_error(errc::invalid_payload, "row " + std::to_string(first) + ": " + err);
    logits.resize(static_cast<size_t>(b.size) * tasks);
    scorer.score(b.size, b.offsets, b.ids, b.weights, b.dense, logits.data());
    for (int i = 0; i < n; ++i) {
      for (int t = 0; t < tasks; ++t) {
        all_logits[t].push_back(logits[i * tasks + t]);
        labels[t].push_back(b.labels[i * tasks + t]);
      }
      if (on_row)
        on_row(b, i, logits.data() + i * tasks);
    }
    res.rows += n;
  }
  res.seconds = std::chrono::duration<double>(e.steady_now() - started).count();
  auto rows = res.rows;
  for (int t = 0; t < tasks; ++t) {
    std::vector<float> scores(all_logits[t].size());
    double positives = 0;
    for (size_t i = 0; i < scores.size(); ++i) {
      scores[i] = sigmoid(all_logits[t][i]);
      positives += labels[t][i] > 0.5f;
    }
    task_scores ts;
    ts.auc = rows > 0 ? auc_exact(scores, labels[t]) : std::nan("");
    ts.logloss = rows > 0 ? logloss_from_logits(all_logits[t], labels[t]) : std::nan("");
    double p = rows > 0 ? positives / static_cast<double>(rows) : 0;
    double base = (p > 0 && p < 1) ? -(p * std::log(p) + (1 - p) * std::log(1 - p)) : std::nan("");
    ts.ne = ts.logloss / base;
    res.tasks.push_back(ts);
  }
  res.auc = res.tasks[0].auc;
  res.logloss = res.tasks[0].logloss;
  res.ne = res.tasks[0].ne;
  res.rows_per_sec = res.seconds > 0 ? static_cast<double>(rows) / res.seconds : 0;
  return res;
}

}  // namespace satrap
