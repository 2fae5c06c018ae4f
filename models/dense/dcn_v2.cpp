// DCN-v2 (stacked): bottom MLP, full-rank cross layers over [bottom(dense), e_1..e_slots], top MLP.
#include <algorithm>
#include "models/assert.hpp"
#include <cassert>

#include "models/dense/bce.hpp"
#include "models/dense/concat.hpp"
#include "models/dense/mlp.hpp"
#include "models/dense/model_zoo.hpp"
#include "models/dense/param_blocks.hpp"

namespace satrap {

namespace {

// Blocks: bottom, cross layer l at cross(l), then top.
constexpr size_t bottom = 0;
constexpr size_t cross(size_t l) { return 1 + l; }

class dcn_v2 final : public block_model {
 public:
  dcn_v2(const dense_model_config& config, uint64_t seed)
      : block_model(dcn_v2_blocks(config), seed),
        config_(config),
        width_((config.slots + 1) * config.dim),
        layers_(static_cast<size_t>(config.cross_layers)),
        top_(cross(layers_)) {
    xs_.resize(layers_ + 1);
  }

  void forward(int batch, const float* dense, const float* pooled, float* logits) override {
    const float* out = run_forward(batch, dense, pooled);
    std::copy(out, out + static_cast<size_t>(batch) * config_.tasks, logits);
  }

  double forward_backward(int batch, const float* dense, const float* pooled, const float* labels,
                          float loss_scale, float* logits, float* pooled_grad) override {
    const float* out = run_forward(batch, dense, pooled);
    std::copy(out, out + static_cast<size_t>(batch) * config_.tasks, logits);
    dlogits_.resize(static_cast<size_t>(batch) * config_.tasks);
    double loss =
      bce_with_logits_tasks(batch, config_.tasks, logits, labels,
                            config_.task_weights.empty() ? nullptr : config_.task_weights.data(),
                            loss_scale, dlogits_.data());
    const size_t n = static_cast<size_t>(batch) * width_;
    g_.resize(n);
    blocks_.backward(top_, batch, dlogits_.data(), g_.data());
    // g = dL/dx_{l+1}; x_{l+1} = x0 * u_l + x_l with u_l = W_l x_l + b_l.
    dx0_.assign(n, 0.0f);
    du_.resize(n);
    dxl_.resize(n);
    const float* x0 = xs_[0].data();
    for (size_t l = layers_; l-- > 0;) {
      const float* u = blocks_.net(cross(l)).output();
      for (size_t i = 0; i < n; ++i) {
        du_[i] = g_[i] * x0[i];
        dx0_[i] += g_[i] * u[i];
      }
      blocks_.backward(cross(l), batch, du_.data(), dxl_.data());
      for (size_t i = 0; i < n; ++i)
        g_[i] += dxl_[i];
    }
    for (size_t i = 0; i < n; ++i)
      g_[i] += dx0_[i];  // x_0 is x0 itself
    dx_.resize(static_cast<size_t>(batch) * config_.dim);
    split_rows(batch, config_.dim, dx_.data(), config_.slots * config_.dim, pooled_grad, g_.data());
    blocks_.backward(bottom, batch, dx_.data(), nullptr);
    return loss;
  }

 private:
  const float* run_forward(int batch, const float* dense, const float* pooled) {
    SATRAP_ASSERT(batch > 0);
    const size_t n = static_cast<size_t>(batch) * width_;
    const float* x = blocks_.forward(bottom, batch, dense);
    for (auto& v : xs_)
      v.resize(n);
    concat_rows(batch, config_.dim, x, config_.slots * config_.dim, pooled, xs_[0].data());
    const float* x0 = xs_[0].data();
    for (size_t l = 0; l < layers_; ++l) {
      const float* u = blocks_.forward(cross(l), batch, xs_[l].data());
      const float* xl = xs_[l].data();
      float* next = xs_[l + 1].data();
      for (size_t i = 0; i < n; ++i)
        next[i] = x0[i] * u[i] + xl[i];
    }
    return blocks_.forward(top_, batch, xs_.back().data());
  }

  dense_model_config config_;
  int width_;                           // (slots + 1) * dim
  size_t layers_;                       // cross layers (one linear layer each, no activation)
  size_t top_;                          // the top MLP's block
  std::vector<std::vector<float>> xs_;  // x_0 .. x_L
  std::vector<float> g_, dx0_, du_, dxl_, dx_, dlogits_;
};

}  // namespace

// Params: bottom, cross layers (seeds 2, 3, ...), top (seed 1).
std::vector<mlp_block> dcn_v2_blocks(const dense_model_config& c) {
  const int width = (c.slots + 1) * c.dim;
  std::vector<mlp_block> blocks{{c.dense_features, mlp_sizes(c.bottom, c.dim), 0}};
  for (int l = 0; l < c.cross_layers; ++l)
    blocks.push_back({width, {width}, 2 + static_cast<uint64_t>(l)});
  blocks.push_back({width, mlp_sizes(c.top, c.tasks), 1});
  return blocks;
}

std::unique_ptr<dense_model> make_dcn_v2(const dense_model_config& config, uint64_t seed) {
  return std::make_unique<dcn_v2>(config, seed);
}

}  // namespace satrap
