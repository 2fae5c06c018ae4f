// Wide&Deep: a linear layer over [dense, e_1..e_slots] plus the deep MLP over
// [bottom(dense), e_1..e_slots].
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

enum wide_deep_block : size_t { bottom, wide, top };

class wide_deep final : public block_model {
 public:
  wide_deep(const dense_model_config& config, uint64_t seed)
      : block_model(wide_deep_blocks(config), seed),
        config_(config),
        emb_(config.slots * config.dim) {}

  void forward(int batch, const float* dense, const float* pooled, float* logits) override {
    run_forward(batch, dense, pooled, logits);
  }

  double forward_backward(int batch, const float* dense, const float* pooled, const float* labels,
                          float loss_scale, float* logits, float* pooled_grad) override {
    run_forward(batch, dense, pooled, logits);
    dlogits_.resize(batch);
    double loss = bce_with_logits(batch, logits, labels, loss_scale, dlogits_.data());
    const int dim = config_.dim, df = config_.dense_features;
    dz_.resize(static_cast<size_t>(batch) * blocks_.net(top).in());
    dw_.resize(static_cast<size_t>(batch) * blocks_.net(wide).in());
    blocks_.backward(top, batch, dlogits_.data(), dz_.data());
    blocks_.backward(wide, batch, dlogits_.data(), dw_.data());
    dx_.resize(static_cast<size_t>(batch) * dim);
    split_rows(batch, dim, dx_.data(), emb_, pooled_grad, dz_.data());
    for (int s = 0; s < batch; ++s) {  // the wide part's share of pooled_grad
      const float* w = dw_.data() + static_cast<size_t>(s) * (df + emb_) + df;
      float* p = pooled_grad + static_cast<size_t>(s) * emb_;
      for (int j = 0; j < emb_; ++j)
        p[j] += w[j];
    }
    blocks_.backward(bottom, batch, dx_.data(), nullptr);
    return loss;
  }

 private:
  void run_forward(int batch, const float* dense, const float* pooled, float* logits) {
    SATRAP_ASSERT(batch > 0);
    const int dim = config_.dim, df = config_.dense_features;
    const float* x = blocks_.forward(bottom, batch, dense);
    z_.resize(static_cast<size_t>(batch) * blocks_.net(top).in());
    concat_rows(batch, dim, x, emb_, pooled, z_.data());
    w_.resize(static_cast<size_t>(batch) * blocks_.net(wide).in());
    concat_rows(batch, df, dense, emb_, pooled, w_.data());
    const float* deep = blocks_.forward(top, batch, z_.data());
    const float* linear = blocks_.forward(wide, batch, w_.data());
    for (int s = 0; s < batch; ++s)
      logits[s] = linear[s] + deep[s];
  }

  dense_model_config config_;
  int emb_;               // slots * dim
  std::vector<float> z_;  // deep input [bottom(dense), e_1..e_slots]
  std::vector<float> w_;  // wide input [dense, e_1..e_slots]
  std::vector<float> dz_, dw_, dx_, dlogits_;
};

}  // namespace

// Params: bottom, wide (one linear layer to 1; seed 2), top (seed 1).
std::vector<mlp_block> wide_deep_blocks(const dense_model_config& c) {
  const int emb = c.slots * c.dim;
  return {{c.dense_features, mlp_sizes(c.bottom, c.dim), 0},
          {c.dense_features + emb, {1}, 2},
          {c.dim + emb, mlp_sizes(c.top, 1), 1}};
}

std::unique_ptr<dense_model> make_wide_deep(const dense_model_config& config, uint64_t seed) {
  return std::make_unique<wide_deep>(config, seed);
}

}  // namespace satrap
