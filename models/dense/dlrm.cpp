#include <algorithm>
#include "models/assert.hpp"
#include <cassert>

#include "models/dense/bce.hpp"
#include "models/dense/concat.hpp"
#include "models/dense/interaction.hpp"
#include "models/dense/mlp.hpp"
#include "models/embedding/id_map.hpp"
#include "models/dense/model_zoo.hpp"
#include "models/dense/param_blocks.hpp"

namespace satrap {

namespace {

enum dlrm_block : size_t { bottom, top };

class dlrm final : public block_model {
 public:
  dlrm(const dense_model_config& config, uint64_t seed)
      : block_model(dlrm_blocks(config), seed), config_(config), top_(blocks_.net(top)) {
    top_.set_dropout(config.dropout);
    dropout_key_ = mix64(seed ^ 0xd20f0d20f0ULL);
  }

  void forward(int batch, const float* dense, const float* pooled, float* logits) override {
    const float* out = run_forward(batch, dense, pooled);
    std::copy(out, out + static_cast<size_t>(batch) * config_.tasks, logits);
  }

  double forward_backward(int batch, const float* dense, const float* pooled, const float* labels,
                          float loss_scale, float* logits, float* pooled_grad) override {
    top_.train_mode(true, mix64(dropout_key_ + ++train_steps_));
    const float* out = run_forward(batch, dense, pooled);
    top_.train_mode(false, 0);
    std::copy(out, out + static_cast<size_t>(batch) * config_.tasks, logits);
    dlogits_.resize(static_cast<size_t>(batch) * config_.tasks);
    double loss =
      bce_with_logits_tasks(batch, config_.tasks, logits, labels,
                            config_.task_weights.empty() ? nullptr : config_.task_weights.data(),
                            loss_scale, dlogits_.data());
    dz_.resize(static_cast<size_t>(batch) * top_.in());
    blocks_.backward(top, batch, dlogits_.data(), dz_.data());
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
    blocks_.backward(bottom, batch, dx_.data(), nullptr);
    return loss;
  }

 private:
  const float* run_forward(int batch, const float* dense, const float* pooled) {
    SATRAP_ASSERT(batch > 0);
    x_ = blocks_.forward(bottom, batch, dense);
    z_.resize(static_cast<size_t>(batch) * top_.in());
    const int dim = config_.dim, slots = config_.slots;
    const int emb = slots * dim;
    switch (config_.interaction) {
      case dlrm_interaction::dot:
        interaction_forward(batch, slots, dim, x_, pooled, z_.data());
        break;
      case dlrm_interaction::cat: concat_rows(batch, dim, x_, emb, pooled, z_.data()); break;
      case dlrm_interaction::dot_cat: {
        const int dots = interaction_output_size(slots, dim);
        zi_.resize(static_cast<size_t>(batch) * dots);
        interaction_forward(batch, slots, dim, x_, pooled, zi_.data());
        concat_rows(batch, dots, zi_.data(), emb, pooled, z_.data());
        break;
      }
    }
    return blocks_.forward(top, batch, z_.data());
  }

  dense_model_config config_;
  mlp& top_;                  // blocks_.net(top)
  const float* x_ = nullptr;  // bottom output, owned by the bottom MLP
  std::vector<float> z_, dz_, dx_, dlogits_, zi_, dzi_, demb_;
  uint64_t dropout_key_ = 0;
  uint64_t train_steps_ = 0;  // a new dropout mask per training forward
};

}  // namespace

// Params: bottom, top.
std::vector<mlp_block> dlrm_blocks(const dense_model_config& c) {
  return {{c.dense_features, mlp_sizes(c.bottom, c.dim), 0},
          {dlrm_top_input(c), mlp_sizes(c.top, c.tasks), 1}};
}

int dlrm_top_input(const dense_model_config& c) {
  switch (c.interaction) {
    case dlrm_interaction::dot: return interaction_output_size(c.slots, c.dim);
    case dlrm_interaction::cat: return (c.slots + 1) * c.dim;
    case dlrm_interaction::dot_cat:
      return interaction_output_size(c.slots, c.dim) + c.slots * c.dim;
  }
  return 0;
}

std::unique_ptr<dense_model> make_dlrm(const dense_model_config& config, uint64_t seed) {
  return std::make_unique<dlrm>(config, seed);
}

}  // namespace satrap
