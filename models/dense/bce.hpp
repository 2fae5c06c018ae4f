// Binary cross-entropy with logits, numerically stable, with its gradient.
// Threading: free functions on caller-owned memory.
#pragma once

namespace satrap {

// loss_i = max(z,0) - z*y + log1p(exp(-|z|)). dlogits[i] = (sigmoid(z_i) - y_i) * scale.
// Returns the unscaled sum of losses.
double bce_with_logits(int batch, const float* logits, const float* labels, float scale,
                       float* dlogits);

}  // namespace satrap
