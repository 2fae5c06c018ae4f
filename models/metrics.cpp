#include "models/metrics.hpp"
#include "models/assert.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <numeric>

namespace satrap {

float sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
  float e = std::exp(x);
  return e / (1.0f + e);
}

double auc_exact(std::span<const float> scores, std::span<const float> labels) {
  SATRAP_ASSERT(scores.size() == labels.size());
  size_t n = scores.size();
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return scores[a] < scores[b]; });
  double positives = 0.0, rank_sum = 0.0;  // sum of the positives' (1-based, mid) ranks
  for (size_t i = 0; i < n;) {
    size_t j = i;
    double group_pos = 0.0;
    while (j < n && scores[order[j]] == scores[order[i]]) group_pos += labels[order[j++]] > 0.5f;
    double mid_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    rank_sum += group_pos * mid_rank;
    positives += group_pos;
    i = j;
  }
  double negatives = static_cast<double>(n) - positives;
  if (positives == 0.0 || negatives == 0.0) return 0.5;
  return (rank_sum - positives * (positives + 1.0) / 2.0) / (positives * negatives);
}

double logloss_from_logits(std::span<const float> logits, std::span<const float> labels) {
  SATRAP_ASSERT(logits.size() == labels.size());
  if (logits.empty()) return 0.0;
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    double z = logits[i], y = labels[i];
    total += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
  }
  return total / static_cast<double>(logits.size());
}

running_auc::running_auc(size_t window) : window_(window) { SATRAP_ASSERT(window > 0); }

void running_auc::add(std::span<const float> scores, std::span<const float> labels) {
  SATRAP_ASSERT(scores.size() == labels.size());
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

double running_auc::value() const { return auc_exact(scores_, labels_); }

}  // namespace satrap
