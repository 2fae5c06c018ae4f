#include "models/dense/param_blocks.hpp"

namespace satrap {

param_blocks::param_blocks(const std::vector<mlp_block>& blocks, uint64_t seed) {
  nets_.reserve(blocks.size());
  size_t count = 0;
  for (auto& b : blocks) {
    nets_.emplace_back(b.in, b.sizes, false);
    offsets_.push_back(count);
    count += nets_.back().param_count();
  }
  params_.resize(count);
  grads_.resize(count);
  for (size_t i = 0; i < blocks.size(); ++i)
    nets_[i].init(params(i), seed + blocks[i].seed_offset);
}

std::vector<mlp_block> dense_model_blocks(const dense_model_config& config) {
  switch (config.type) {
    case dense_model_type::dlrm: return dlrm_blocks(config);
    case dense_model_type::dcn_v2: return dcn_v2_blocks(config);
    case dense_model_type::deepfm: return deepfm_blocks(config);
    case dense_model_type::wide_deep: return wide_deep_blocks(config);
    case dense_model_type::torchscript: return {};  // the module's own layout
  }
  return {};
}

}  // namespace satrap
