// Evaluation metrics: exact AUC (mid-ranks for ties), mean log loss, a windowed running AUC.
// Threading: free functions are pure; running_auc is not thread-safe (one owner).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace satrap {

float sigmoid(float x);

// Area under the ROC curve; ties get mid-ranks; 0.5 when one class is absent.
double auc_exact(std::span<const float> scores, std::span<const float> labels);

// Mean binary cross-entropy of sigmoid(logits), computed stably from the logits.
double logloss_from_logits(std::span<const float> logits, std::span<const float> labels);

// AUC over the last `window` (score, label) pairs.
class running_auc {
 public:
  explicit running_auc(size_t window);
  void add(std::span<const float> scores, std::span<const float> labels);
  double value() const;
  size_t count() const { return scores_.size(); }

 private:
  size_t window_;
  size_t next_ = 0;  // ring position once full
  std::vector<float> scores_;
  std::vector<float> labels_;
};

}  // namespace satrap
