#include "models/metrics.hpp"
#include "models/assert.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include <numeric>

namespace satrap {

float sigmoid(float x) {
  if (x >= 0.0f)
    return 1.0f / (1.0f + std::exp(-x));
  float e = std::exp(x);
  return e / (1.0f + e);
}

// Each prediction becomes one 33-bit key: the score's bits made to sort as unsigned integers
// (+0 and -0 as one), then the label. An LSD radix sort of the keys (3 passes of 11 bits) puts
// equal scores together in ascending order; the walk over groups is the mid-rank sum as before.
// (The running AUC of every trainer sorts its 100,000-prediction window every 20 steps: with
// std::sort of indices through the scores that was ~14% of the default job's CPU.)
double auc_exact(std::span<const float> scores, std::span<const float> labels) {
  SATRAP_ASSERT(scores.size() == labels.size());
  const size_t n = scores.size();
  std::vector<uint64_t> keys(n), spare(n);
  for (size_t i = 0; i < n; ++i) {
    float s = scores[i] == 0.0f ? 0.0f : scores[i];
    uint32_t b;
    std::memcpy(&b, &s, sizeof b);
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    keys[i] = (static_cast<uint64_t>(b) << 1) | static_cast<uint64_t>(labels[i] > 0.5f);
  }
  constexpr int bits = 11, passes = 3;  // 33 key bits
  std::vector<size_t> count(size_t{1} << bits);
  for (int pass = 0; pass < passes; ++pass) {
    const int shift = pass * bits;
    std::fill(count.begin(), count.end(), 0);
    for (uint64_t k : keys)
      ++count[(k >> shift) & ((1u << bits) - 1)];
    size_t sum = 0;
    for (size_t& c : count) {
      size_t here = c;
      c = sum;
      sum += here;
    }
    for (uint64_t k : keys)
      spare[count[(k >> shift) & ((1u << bits) - 1)]++] = k;
    keys.swap(spare);
  }
  double positives = 0.0, rank_sum = 0.0;  // sum of the positives' (1-based, mid) ranks
  for (size_t i = 0; i < n;) {
    size_t j = i;
    double group_pos = 0.0;
    while (j < n && (keys[j] >> 1) == (keys[i] >> 1))
      group_pos += static_cast<double>(keys[j++] & 1);
    double mid_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    rank_sum += group_pos * mid_rank;
    positives += group_pos;
    i = j;
  }
  double negatives = static_cast<double>(n) - positives;
  if (positives == 0.0 || negatives == 0.0)
    return 0.5;
  return (rank_sum - positives * (positives + 1.0) / 2.0) / (positives * negatives);
}

double logloss_from_logits(std::span<const float> logits, std::span<const float> labels) {
  SATRAP_ASSERT(logits.size() == labels.size());
  if (logits.empty())
    return 0.0;
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    double z = logits[i], y = labels[i];
    total += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
  }
  return total / static_cast<double>(logits.size());
}

running_auc::running_auc(size_t window, size_t refresh)
    : window_(window), refresh_(refresh), added_since_(refresh) {
  SATRAP_ASSERT(window > 0 && refresh > 0, "window={} refresh={}", window, refresh);
}

void running_auc::add(std::span<const float> scores, std::span<const float> labels) {
  SATRAP_ASSERT(scores.size() == labels.size());
  added_since_ += scores.size();
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores_.size() < window_) {
      scores_.push_back(scores[i]);
      labels_.push_back(labels[i]);
    } else {
      scores_[next_] = scores[i];
      labels_[next_] = labels[i];
      next_ = (next_ + 1) % window_;
    }
  }
}

double running_auc::value() {
  if (added_since_ >= refresh_) {
    last_ = auc_exact(scores_, labels_);
    added_since_ = 0;
  }
  return last_;
}

}  // namespace satrap

namespace satrap {

double grouped_auc(std::span<const float> scores, std::span<const float> labels,
                   std::span<const uint64_t> groups) {
  SATRAP_ASSERT(scores.size() == labels.size() && groups.size() == scores.size());
  std::vector<uint32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return groups[a] < groups[b]; });
  double weighted = 0.0, weight = 0.0;
  std::vector<float> s, l;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    s.clear();
    l.clear();
    double pos = 0.0;
    while (j < order.size() && groups[order[j]] == groups[order[i]]) {
      s.push_back(scores[order[j]]);
      l.push_back(labels[order[j]]);
      pos += labels[order[j]] > 0.5f;
      ++j;
    }
    auto n = static_cast<double>(j - i);
    if (pos > 0.0 && pos < n) {
      weighted += n * auc_exact(s, l);
      weight += n;
    }
    i = j;
  }
  return weight > 0.0 ? weighted / weight : std::nan("");
}

eval_metrics compute_eval_metrics(std::span<const float> logits, std::span<const float> labels,
                                  std::span<const uint64_t> groups) {
  SATRAP_ASSERT(logits.size() == labels.size());
  eval_metrics m;
  m.samples = static_cast<int64_t>(logits.size());
  std::vector<float> scores(logits.size());
  double prob_sum = 0.0, label_sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    scores[i] = sigmoid(logits[i]);
    prob_sum += scores[i];
    label_sum += labels[i];
  }
  m.auc = auc_exact(scores, labels);
  m.logloss = logloss_from_logits(logits, labels);
  auto n = static_cast<double>(logits.size());
  double p = n > 0 ? label_sum / n : 0.0;
  double entropy = (p > 0.0 && p < 1.0) ? -(p * std::log(p) + (1.0 - p) * std::log(1.0 - p)) : 0.0;
  m.ne = entropy > 0.0 ? m.logloss / entropy : std::nan("");
  m.calibration = label_sum > 0.0 ? prob_sum / label_sum : std::nan("");
  m.gauc = groups.size() == logits.size() && !groups.empty() ? grouped_auc(scores, labels, groups)
                                                             : std::nan("");
  return m;
}

std::vector<float> task_column(std::span<const float> values, int tasks, int task) {
  SATRAP_ASSERT(tasks >= 1 && task >= 0 && task < tasks && values.size() % tasks == 0);
  std::vector<float> out(values.size() / static_cast<size_t>(tasks));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = values[i * static_cast<size_t>(tasks) + static_cast<size_t>(task)];
  return out;
}

std::vector<eval_metrics> compute_task_metrics(std::span<const float> logits,
                                               std::span<const float> labels,
                                               std::span<const uint64_t> groups, int tasks) {
  std::vector<eval_metrics> out;
  if (tasks == 1) {
    out.push_back(compute_eval_metrics(logits, labels, groups));
    return out;
  }
  for (int t = 0; t < tasks; ++t) {
    auto z = task_column(logits, tasks, t), y = task_column(labels, tasks, t);
    out.push_back(compute_eval_metrics(z, y, groups));
  }
  return out;
}

eval_metrics combine_task_metrics(const std::vector<eval_metrics>& per_task,
                                  std::span<const float> task_weights) {
  SATRAP_ASSERT(!per_task.empty());
  if (per_task.size() == 1)
    return per_task[0];
  eval_metrics m;
  m.auc = m.logloss = m.ne = m.calibration = m.gauc = 0.0;
  double total = 0.0;
  for (size_t t = 0; t < per_task.size(); ++t) {
    double w = task_weights.size() == per_task.size() ? task_weights[t] : 1.0;
    total += w;
    m.auc += w * per_task[t].auc;
    m.logloss += w * per_task[t].logloss;
    m.ne += w * per_task[t].ne;
    m.calibration += w * per_task[t].calibration;
    m.gauc += w * per_task[t].gauc;
  }
  if (total > 0)
    for (double* f : {&m.auc, &m.logloss, &m.ne, &m.calibration, &m.gauc})
      *f /= total;
  m.samples = per_task[0].samples;
  return m;
}

}  // namespace satrap
