// DLRM: bottom MLP on dense features, pairwise-dot interaction with pooled embeddings, top MLP.
// Threading: the model returned by make_dlrm is not thread-safe; one owner at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "models/dense/dense_model.hpp"

namespace satrap {

// Shape of a DLRM.
struct dlrm_config {
  int dense_features = 13;         // dense inputs per sample
  int slots = 8;                   // pooled embeddings per sample
  int dim = 16;                    // embedding size (= bottom MLP output size)
  std::vector<int> bottom = {32};  // hidden sizes of the bottom MLP; a last layer outputs `dim` (no activation after it)
  std::vector<int> top = {64, 32}; // hidden sizes of the top MLP; a last layer outputs 1 logit
};

// Parameters start like PyTorch's nn.Linear (uniform +-1/sqrt(fan_in)), deterministic in seed.
std::unique_ptr<dense_model> make_dlrm(const dlrm_config& config, uint64_t seed);

}  // namespace satrap
