// Binary cross-entropy with logits, numerically stable, with its gradient.
// Threading: free functions on caller-owned memory.
#pragma once

namespace satrap {

// loss_i = max(z,0) - z*y + log1p(exp(-|z|)). dlogits[i] = (sigmoid(z_i) - y_i) * scale.
// Returns the unscaled sum of losses.
double bce_with_logits(int batch, const float* logits, const float* labels, float scale,
                       float* dlogits);

// Several tasks: logits and labels are batch x tasks, row-major (one row per sample). Task t's
// loss is multiplied by task_weights[t] (nullptr: every task weighs 1), its gradient likewise.
// Returns the unscaled, task-weighted sum of losses. tasks == 1 without weights is the above.
double bce_with_logits_tasks(int batch, int tasks, const float* logits, const float* labels,
                             const float* task_weights, float scale, float* dlogits);

}  // namespace satrap
