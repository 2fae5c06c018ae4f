// The parameter blocks of the zoo's dense models (model_zoo.hpp). Each model is made of MLPs
// (a linear layer is a one-layer MLP) whose parameters lie one after the other in one flat vector;
// a model's block list says which, in that order, and the seed each block starts from. The one list
// serves both the model (param_blocks lays the blocks out, initialises them and hands each its
// slice of the parameters and gradients) and dense_model_param_count (the planner's count, without
// building the model).
// Threading: param_blocks has one owner (its MLPs keep activation scratch).
#pragma once

#include "models/dense/dense_model.hpp"
#include "models/dense/mlp.hpp"
#include "models/dense/model_zoo.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace satrap {

struct mlp_block {
  int in = 0;                // input width
  std::vector<int> sizes;    // layer sizes; the last is the block's output
  uint64_t seed_offset = 0;  // the block starts from init(seed + seed_offset)
};

// Each model's blocks, in flat-vector order (the bottom MLP first); defined beside each model.
std::vector<mlp_block> dlrm_blocks(const dense_model_config& config);
std::vector<mlp_block> dcn_v2_blocks(const dense_model_config& config);
std::vector<mlp_block> deepfm_blocks(const dense_model_config& config);
std::vector<mlp_block> wide_deep_blocks(const dense_model_config& config);
// The blocks of config.type's model.
std::vector<mlp_block> dense_model_blocks(const dense_model_config& config);

// The MLPs of a block list over one flat parameter vector and its gradient vector.
class param_blocks {
 public:
  // Builds each block's MLP (no ReLU after its last layer), lays the blocks out in order and
  // initialises each from seed + its seed_offset.
  param_blocks(const std::vector<mlp_block>& blocks, uint64_t seed);

  mlp& net(size_t block) { return nets_[block]; }
  const mlp& net(size_t block) const { return nets_[block]; }
  float* params(size_t block) { return params_.data() + offsets_[block]; }
  const float* params(size_t block) const { return params_.data() + offsets_[block]; }
  float* grads(size_t block) { return grads_.data() + offsets_[block]; }
  // Block `block`'s forward / backward over its own slice of the parameters and gradients.
  const float* forward(size_t block, int batch, const float* x) {
    return nets_[block].forward(batch, params(block), x);
  }
  void backward(size_t block, int batch, const float* dy, float* dx) {
    nets_[block].backward(batch, params(block), dy, grads(block), dx);
  }

  std::span<float> params() { return params_; }
  std::span<const float> params() const { return params_; }
  std::span<float> grads() { return grads_; }

 private:
  std::vector<mlp> nets_;
  std::vector<size_t> offsets_;  // first parameter of each block
  std::vector<float> params_, grads_;
};

// A dense model whose parameters are param_blocks: the flat views come from them.
class block_model : public dense_model {
 public:
  block_model(const std::vector<mlp_block>& blocks, uint64_t seed) : blocks_(blocks, seed) {}
  std::span<float> params() override { return blocks_.params(); }
  std::span<const float> params() const override { return blocks_.params(); }
  std::span<float> grads() override { return blocks_.grads(); }

 protected:
  param_blocks blocks_;
};

}  // namespace satrap
