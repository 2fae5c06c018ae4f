// Wide&Deep: a linear layer over [dense, e_1..e_slots] plus the deep MLP over
// [bottom(dense), e_1..e_slots].
#include <algorithm>
#include "models/assert.hpp"
#include <cassert>

#include "models/dense/bce.hpp"
#include "models/dense/concat.hpp"
#include "models/dense/mlp.hpp"
#include "models/dense/model_zoo.hpp"

namespace satrap {

namespace {

class wide_deep final : public dense_model {
 public:
  wide_deep(const dense_model_config& config, uint64_t seed)
      : config_(config),
        emb_(config.slots * config.dim),
        bottom_(config.dense_features, mlp_sizes(config.bottom, config.dim), false),
        wide_(config.dense_features + emb_, {1}, false),
        top_(config.dim + emb_, mlp_sizes(config.top, 1), false) {
    wide_offset_ = bottom_.param_count();
    top_offset_ = wide_offset_ + wide_.param_count();
    params_.resize(top_offset_ + top_.param_count());
    grads_.resize(params_.size());
    bottom_.init(params_.data(), seed);
    top_.init(params_.data() + top_offset_, seed + 1);
    wide_.init(params_.data() + wide_offset_, seed + 2);
  }

  std::span<float> params() override { return params_; }
  std::span<const float> params() const override { return params_; }
  std::span<float> grads() override { return grads_; }

  void forward(int batch, const float* dense, const float* pooled, float* logits) override {
    run_forward(batch, dense, pooled, logits);
  }

  double forward_backward(int batch, const float* dense, const float* pooled, const float* labels,
                          float loss_scale, float* logits, float* pooled_grad) override {
    run_forward(batch, dense, pooled, logits);
    dlogits_.resize(batch);
    double loss = bce_with_logits(batch, logits, labels, loss_scale, dlogits_.data());
    const int dim = config_.dim, df = config_.dense_features;
    dz_.resize(static_cast<size_t>(batch) * top_.in());
    dw_.resize(static_cast<size_t>(batch) * wide_.in());
    top_.backward(batch, params_.data() + top_offset_, dlogits_.data(),
                  grads_.data() + top_offset_, dz_.data());
    wide_.backward(batch, params_.data() + wide_offset_, dlogits_.data(),
                   grads_.data() + wide_offset_, dw_.data());
    dx_.resize(static_cast<size_t>(batch) * dim);
    split_rows(batch, dim, dx_.data(), emb_, pooled_grad, dz_.data());
    for (int s = 0; s < batch; ++s) {  // the wide part's share of pooled_grad
      const float* w = dw_.data() + static_cast<size_t>(s) * (df + emb_) + df;
      float* p = pooled_grad + static_cast<size_t>(s) * emb_;
      for (int j = 0; j < emb_; ++j) p[j] += w[j];
    }
    bottom_.backward(batch, params_.data(), dx_.data(), grads_.data(), nullptr);
    return loss;
  }

 private:
  void run_forward(int batch, const float* dense, const float* pooled, float* logits) {
    SATRAP_ASSERT(batch > 0);
    const int dim = config_.dim, df = config_.dense_features;
    const float* x = bottom_.forward(batch, params_.data(), dense);
    z_.resize(static_cast<size_t>(batch) * top_.in());
    concat_rows(batch, dim, x, emb_, pooled, z_.data());
    w_.resize(static_cast<size_t>(batch) * wide_.in());
    concat_rows(batch, df, dense, emb_, pooled, w_.data());
    const float* deep = top_.forward(batch, params_.data() + top_offset_, z_.data());
    const float* wide = wide_.forward(batch, params_.data() + wide_offset_, w_.data());
    for (int s = 0; s < batch; ++s) logits[s] = wide[s] + deep[s];
  }

  dense_model_config config_;
  int emb_;                          // slots * dim
  mlp bottom_;
  mlp wide_;                         // one linear layer to 1
  mlp top_;
  size_t wide_offset_ = 0, top_offset_ = 0;
  std::vector<float> params_;
  std::vector<float> grads_;
  std::vector<float> z_;             // deep input [bottom(dense), e_1..e_slots]
  std::vector<float> w_;             // wide input [dense, e_1..e_slots]
  std::vector<float> dz_, dw_, dx_, dlogits_;
};

}  // namespace

std::unique_ptr<dense_model> make_wide_deep(const dense_model_config& config, uint64_t seed) {
  return std::make_unique<wide_deep>(config, seed);
}

}  // namespace satrap
