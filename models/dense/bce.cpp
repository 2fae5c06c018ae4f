#include "models/dense/bce.hpp"

#include <algorithm>
#include <cmath>

namespace satrap {

double bce_with_logits(int batch, const float* logits, const float* labels, float scale,
                       float* dlogits) {
  double total = 0.0;
  for (int i = 0; i < batch; ++i) {
    double z = logits[i], y = labels[i];
    total += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
    double p = z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z));
    if (dlogits != nullptr) dlogits[i] = static_cast<float>((p - y) * scale);
  }
  return total;
}

}  // namespace satrap
