#include <algorithm>
#include "models/assert.hpp"
#include <cassert>

#include "models/dense/bce.hpp"
#include "models/dense/concat.hpp"
#include "models/dense/interaction.hpp"
#include "models/dense/mlp.hpp"
#include "models/embedding/id_map.hpp"
#include "models/dense/model_zoo.hpp"

namespace satrap {

namespace {

class dlrm final : public dense_model {
 public:
  dlrm(const dense_model_config& config, uint64_t seed)
      : config_(config),
        bottom_(config.dense_features, mlp_sizes(config.bottom, config.dim), false),
        top_(dlrm_top_input(config), mlp_sizes(config.top, 1), false) {
    params_.resize(bottom_.param_count() + top_.param_count());
    grads_.resize(params_.size());
    bottom_.init(params_.data(), seed);
    top_.init(params_.data() + bottom_.param_count(), seed + 1);
    top_.set_dropout(config.dropout);
    dropout_key_ = mix64(seed ^ 0xd20f0d20f0ULL);
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
    top_.train_mode(true, mix64(dropout_key_ + ++train_steps_));
    const float* out = run_forward(batch, dense, pooled);
    top_.train_mode(false, 0);
    std::copy(out, out + batch, logits);
    dlogits_.resize(batch);
    double loss = bce_with_logits(batch, logits, labels, loss_scale, dlogits_.data());
    dz_.resize(static_cast<size_t>(batch) * top_.in());
    top_.backward(batch, top_params(), dlogits_.data(), grads_.data() + bottom_.param_count(),
                  dz_.data());
    dx_.resize(static_cast<size_t>(batch) * config_.dim);
    const int dim = config_.dim, slots = config_.slots;
    const size_t emb = static_cast<size_t>(slots) * dim;
    switch (config_.interaction) {
      case dlrm_interaction::dot:
        interaction_backward(batch, slots, dim, x_, pooled, dz_.data(), dx_.data(), pooled_grad);
        break;
      case dlrm_interaction::cat:
        split_rows(batch, dim, dx_.data(), static_cast<int>(emb), pooled_grad, dz_.data());
        break;
      case dlrm_interaction::dot_cat: {
        const int dots = interaction_output_size(slots, dim);
        dzi_.resize(static_cast<size_t>(batch) * dots);
        demb_.resize(static_cast<size_t>(batch) * emb);
        split_rows(batch, dots, dzi_.data(), static_cast<int>(emb), demb_.data(), dz_.data());
        interaction_backward(batch, slots, dim, x_, pooled, dzi_.data(), dx_.data(), pooled_grad);
        for (size_t i = 0; i < demb_.size(); ++i)
          pooled_grad[i] += demb_[i];
        break;
      }
    }
    bottom_.backward(batch, params_.data(), dx_.data(), grads_.data(), nullptr);
    return loss;
  }

 private:
  const float* top_params() const { return params_.data() + bottom_.param_count(); }

  const float* run_forward(int batch, const float* dense, const float* pooled) {
    SATRAP_ASSERT(batch > 0);
    x_ = bottom_.forward(batch, params_.data(), dense);
    z_.resize(static_cast<size_t>(batch) * top_.in());
    const int dim = config_.dim, slots = config_.slots;
    const int emb = slots * dim;
    switch (config_.interaction) {
      case dlrm_interaction::dot:
        interaction_forward(batch, slots, dim, x_, pooled, z_.data());
        break;
      case dlrm_interaction::cat:
        concat_rows(batch, dim, x_, emb, pooled, z_.data());
        break;
      case dlrm_interaction::dot_cat: {
        const int dots = interaction_output_size(slots, dim);
        zi_.resize(static_cast<size_t>(batch) * dots);
        interaction_forward(batch, slots, dim, x_, pooled, zi_.data());
        concat_rows(batch, dots, zi_.data(), emb, pooled, z_.data());
        break;
      }
    }
    return top_.forward(batch, top_params(), z_.data());
  }

  dense_model_config config_;
  mlp bottom_;
  mlp top_;
  std::vector<float> params_;
  std::vector<float> grads_;
  const float* x_ = nullptr;  // bottom output, owned by bottom_
  std::vector<float> z_, dz_, dx_, dlogits_, zi_, dzi_, demb_;
  uint64_t dropout_key_ = 0;
  uint64_t train_steps_ = 0;  // a new dropout mask per training forward
};

}  // namespace

int dlrm_top_input(const dense_model_config& c) {
  switch (c.interaction) {
    case dlrm_interaction::dot: return interaction_output_size(c.slots, c.dim);
    case dlrm_interaction::cat: return (c.slots + 1) * c.dim;
    case dlrm_interaction::dot_cat: return interaction_output_size(c.slots, c.dim) + c.slots * c.dim;
  }
  return 0;
}

std::unique_ptr<dense_model> make_dlrm(const dense_model_config& config, uint64_t seed) {
  return std::make_unique<dlrm>(config, seed);
}

}  // namespace satrap
