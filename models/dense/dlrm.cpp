#include <algorithm>
#include "models/assert.hpp"
#include <cassert>

#include "models/dense/bce.hpp"
#include "models/dense/interaction.hpp"
#include "models/dense/mlp.hpp"
#include "models/dense/model_zoo.hpp"

namespace satrap {

namespace {

class dlrm final : public dense_model {
 public:
  dlrm(const dense_model_config& config, uint64_t seed)
      : config_(config),
        bottom_(config.dense_features, mlp_sizes(config.bottom, config.dim), false),
        top_(interaction_output_size(config.slots, config.dim), mlp_sizes(config.top, 1), false) {
    params_.resize(bottom_.param_count() + top_.param_count());
    grads_.resize(params_.size());
    bottom_.init(params_.data(), seed);
    top_.init(params_.data() + bottom_.param_count(), seed + 1);
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
    dz_.resize(static_cast<size_t>(batch) * top_.in());
    top_.backward(batch, top_params(), dlogits_.data(), grads_.data() + bottom_.param_count(),
                  dz_.data());
    dx_.resize(static_cast<size_t>(batch) * config_.dim);
    interaction_backward(batch, config_.slots, config_.dim, x_, pooled, dz_.data(), dx_.data(),
                         pooled_grad);
    bottom_.backward(batch, params_.data(), dx_.data(), grads_.data(), nullptr);
    return loss;
  }

 private:
  const float* top_params() const { return params_.data() + bottom_.param_count(); }

  const float* run_forward(int batch, const float* dense, const float* pooled) {
    SATRAP_ASSERT(batch > 0);
    x_ = bottom_.forward(batch, params_.data(), dense);
    z_.resize(static_cast<size_t>(batch) * top_.in());
    interaction_forward(batch, config_.slots, config_.dim, x_, pooled, z_.data());
    return top_.forward(batch, top_params(), z_.data());
  }

  dense_model_config config_;
  mlp bottom_;
  mlp top_;
  std::vector<float> params_;
  std::vector<float> grads_;
  const float* x_ = nullptr;  // bottom output, owned by bottom_
  std::vector<float> z_, dz_, dx_, dlogits_;
};

}  // namespace

std::unique_ptr<dense_model> make_dlrm(const dense_model_config& config, uint64_t seed) {
  return std::make_unique<dlrm>(config, seed);
}

}  // namespace satrap
