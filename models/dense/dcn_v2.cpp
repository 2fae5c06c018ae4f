// DCN-v2 (stacked): bottom MLP, full-rank cross layers over [bottom(dense), e_1..e_slots], top MLP.
#include <algorithm>
#include "models/assert.hpp"
#include <cassert>

#include "models/dense/bce.hpp"
#include "models/dense/concat.hpp"
#include "models/dense/mlp.hpp"
#include "models/dense/model_zoo.hpp"

namespace satrap {

namespace {

class dcn_v2 final : public dense_model {
 public:
  dcn_v2(const dense_model_config& config, uint64_t seed)
      : config_(config),
        width_((config.slots + 1) * config.dim),
        bottom_(config.dense_features, mlp_sizes(config.bottom, config.dim), false),
        top_(width_, mlp_sizes(config.top, 1), false) {
    size_t count = bottom_.param_count();
    for (int l = 0; l < config.cross_layers; ++l) {
      cross_.emplace_back(width_, std::vector<int>{width_}, false);
      cross_offsets_.push_back(count);
      count += cross_.back().param_count();
    }
    top_offset_ = count;
    params_.resize(count + top_.param_count());
    grads_.resize(params_.size());
    bottom_.init(params_.data(), seed);
    top_.init(params_.data() + top_offset_, seed + 1);
    for (size_t l = 0; l < cross_.size(); ++l)
      cross_[l].init(params_.data() + cross_offsets_[l], seed + 2 + l);
    xs_.resize(cross_.size() + 1);
  }

  std::span<float> params() override { return params_; }
  std::span<const float> params() const override { return params_; }
  std::span<float> grads() override { return grads_; }

  void forward(int batch, const float* dense, const float* pooled, float* logits) override {
    const float* out = run_forward(batch, dense, pooled);
    std::copy(out, out + batch, logits);
  }

  double forward_backward(int batch, const float* dense, const float* pooled, const float* labels,
                          float loss_scale, float* logits, float* pooled_grad) override {
    const float* out = run_forward(batch, dense, pooled);
    std::copy(out, out + batch, logits);
    dlogits_.resize(batch);
    double loss = bce_with_logits(batch, logits, labels, loss_scale, dlogits_.data());
    const size_t n = static_cast<size_t>(batch) * width_;
    g_.resize(n);
    top_.backward(batch, params_.data() + top_offset_, dlogits_.data(),
                  grads_.data() + top_offset_, g_.data());
    // g = dL/dx_{l+1}; x_{l+1} = x0 * u_l + x_l with u_l = W_l x_l + b_l.
    dx0_.assign(n, 0.0f);
    du_.resize(n);
    dxl_.resize(n);
    const float* x0 = xs_[0].data();
    for (size_t l = cross_.size(); l-- > 0;) {
      const float* u = cross_[l].output();
      for (size_t i = 0; i < n; ++i) {
        du_[i] = g_[i] * x0[i];
        dx0_[i] += g_[i] * u[i];
      }
      cross_[l].backward(batch, params_.data() + cross_offsets_[l], du_.data(),
                         grads_.data() + cross_offsets_[l], dxl_.data());
      for (size_t i = 0; i < n; ++i) g_[i] += dxl_[i];
    }
    for (size_t i = 0; i < n; ++i) g_[i] += dx0_[i];  // x_0 is x0 itself
    dx_.resize(static_cast<size_t>(batch) * config_.dim);
    split_rows(batch, config_.dim, dx_.data(), config_.slots * config_.dim, pooled_grad, g_.data());
    bottom_.backward(batch, params_.data(), dx_.data(), grads_.data(), nullptr);
    return loss;
  }

 private:
  const float* run_forward(int batch, const float* dense, const float* pooled) {
    SATRAP_ASSERT(batch > 0);
    const size_t n = static_cast<size_t>(batch) * width_;
    const float* x = bottom_.forward(batch, params_.data(), dense);
    for (auto& v : xs_) v.resize(n);
    concat_rows(batch, config_.dim, x, config_.slots * config_.dim, pooled, xs_[0].data());
    const float* x0 = xs_[0].data();
    for (size_t l = 0; l < cross_.size(); ++l) {
      const float* u = cross_[l].forward(batch, params_.data() + cross_offsets_[l], xs_[l].data());
      const float* xl = xs_[l].data();
      float* next = xs_[l + 1].data();
      for (size_t i = 0; i < n; ++i) next[i] = x0[i] * u[i] + xl[i];
    }
    return top_.forward(batch, params_.data() + top_offset_, xs_.back().data());
  }

  dense_model_config config_;
  int width_;                        // (slots + 1) * dim
  mlp bottom_;
  mlp top_;
  std::vector<mlp> cross_;           // one linear layer each (no activation)
  std::vector<size_t> cross_offsets_;
  size_t top_offset_ = 0;
  std::vector<float> params_;
  std::vector<float> grads_;
  std::vector<std::vector<float>> xs_;  // x_0 .. x_L
  std::vector<float> g_, dx0_, du_, dxl_, dx_, dlogits_;
};

}  // namespace

std::unique_ptr<dense_model> make_dcn_v2(const dense_model_config& config, uint64_t seed) {
  return std::make_unique<dcn_v2>(config, seed);
}

}  // namespace satrap
