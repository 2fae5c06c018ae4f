// DeepFM: FM second-order term + first-order linear + deep MLP over [bottom(dense), e_1..e_slots].
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

enum deepfm_block : size_t { bottom, linear, top };

class deepfm final : public block_model {
 public:
  deepfm(const dense_model_config& config, uint64_t seed)
      : block_model(deepfm_blocks(config), seed),
        config_(config),
        fields_(config.slots + 1),
        width_(fields_ * config.dim) {}

  void forward(int batch, const float* dense, const float* pooled, float* logits) override {
    run_forward(batch, dense, pooled, logits);
  }

  double forward_backward(int batch, const float* dense, const float* pooled, const float* labels,
                          float loss_scale, float* logits, float* pooled_grad) override {
    run_forward(batch, dense, pooled, logits);
    dlogits_.resize(batch);
    double loss = bce_with_logits(batch, logits, labels, loss_scale, dlogits_.data());
    const int dim = config_.dim;
    const size_t n = static_cast<size_t>(batch) * width_;
    g_.resize(n);
    tmp_.resize(n);
    blocks_.backward(top, batch, dlogits_.data(), g_.data());
    blocks_.backward(linear, batch, dlogits_.data(), tmp_.data());
    // d fm / d v_ik = S_k - v_ik.
    for (int s = 0; s < batch; ++s) {
      const float* v = z_.data() + static_cast<size_t>(s) * width_;
      const float* sum = sums_.data() + static_cast<size_t>(s) * dim;
      float* g = g_.data() + static_cast<size_t>(s) * width_;
      const float* t = tmp_.data() + static_cast<size_t>(s) * width_;
      const float d = dlogits_[s];
      for (int i = 0; i < fields_; ++i)
        for (int k = 0; k < dim; ++k) {
          const int j = i * dim + k;
          g[j] += t[j] + d * (sum[k] - v[j]);
        }
    }
    dx_.resize(static_cast<size_t>(batch) * dim);
    split_rows(batch, dim, dx_.data(), config_.slots * dim, pooled_grad, g_.data());
    blocks_.backward(bottom, batch, dx_.data(), nullptr);
    return loss;
  }

 private:
  void run_forward(int batch, const float* dense, const float* pooled, float* logits) {
    SATRAP_ASSERT(batch > 0);
    const int dim = config_.dim;
    const float* x = blocks_.forward(bottom, batch, dense);
    z_.resize(static_cast<size_t>(batch) * width_);
    concat_rows(batch, dim, x, config_.slots * dim, pooled, z_.data());
    const float* deep = blocks_.forward(top, batch, z_.data());
    const float* first = blocks_.forward(linear, batch, z_.data());
    sums_.resize(static_cast<size_t>(batch) * dim);
    for (int s = 0; s < batch; ++s) {
      const float* v = z_.data() + static_cast<size_t>(s) * width_;
      float* sum = sums_.data() + static_cast<size_t>(s) * dim;
      std::fill(sum, sum + dim, 0.0f);
      float squares = 0.0f;
      for (int i = 0; i < fields_; ++i)
        for (int k = 0; k < dim; ++k) {
          const float e = v[i * dim + k];
          sum[k] += e;
          squares += e * e;
        }
      float fm = 0.0f;
      for (int k = 0; k < dim; ++k)
        fm += sum[k] * sum[k];
      logits[s] = 0.5f * (fm - squares) + first[s] + deep[s];
    }
  }

  dense_model_config config_;
  int fields_;               // slots + 1
  int width_;                // fields_ * dim
  std::vector<float> z_;     // [bottom(dense), e_1..e_slots] per sample
  std::vector<float> sums_;  // per sample: S_k = sum over fields
  std::vector<float> g_, tmp_, dx_, dlogits_;
};

}  // namespace

// Params: bottom, the first-order term (one linear layer to 1; seed 2), top (seed 1).
std::vector<mlp_block> deepfm_blocks(const dense_model_config& c) {
  const int width = (c.slots + 1) * c.dim;
  return {{c.dense_features, mlp_sizes(c.bottom, c.dim), 0},
          {width, {1}, 2},
          {width, mlp_sizes(c.top, 1), 1}};
}

std::unique_ptr<dense_model> make_deepfm(const dense_model_config& config, uint64_t seed) {
  return std::make_unique<deepfm>(config, seed);
}

}  // namespace satrap
