#include "models/dense/bce.hpp"

#include <algorithm>
#include <cmath>

namespace satrap {

double bce_with_logits(int batch, const float* logits, const float* labels, float scale,
                       float* dlogits) {
  double total = 0.0;
  for (int i = 0; i < batch; ++i) {
    double z = logits[i], y = labels[i];
    // One exp: exp(-|z|) is exp(-z) for z >= 0 and exp(z) below (the same values as before).
    const double e = std::exp(-std::abs(z));
    total += std::max(z, 0.0) - z * y + std::log1p(e);
    double p = z >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    if (dlogits != nullptr)
      dlogits[i] = static_cast<float>((p - y) * scale);
  }
  return total;
}

double bce_with_logits_tasks(int batch, int tasks, const float* logits, const float* labels,
                             const float* task_weights, float scale, float* dlogits) {
  if (tasks == 1 && task_weights == nullptr)
    return bce_with_logits(batch, logits, labels, scale, dlogits);
  double total = 0.0;
  for (int i = 0; i < batch; ++i)
    for (int t = 0; t < tasks; ++t) {
      const size_t k = static_cast<size_t>(i) * tasks + t;
      const double w = task_weights ? task_weights[t] : 1.0;
      double z = logits[k], y = labels[k];
      const double e = std::exp(-std::abs(z));
      total += w * (std::max(z, 0.0) - z * y + std::log1p(e));
      double p = z >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
      if (dlogits != nullptr)
        dlogits[k] = static_cast<float>((p - y) * scale * w);
    }
  return total;
}

}  // namespace satrap
