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

}  // namespace satrap
