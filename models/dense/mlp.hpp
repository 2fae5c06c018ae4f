// A multi-layer perceptron (linear layers, ReLU between them) over a slice of a flat param vector.
// Threading: an mlp owns activation scratch: not thread-safe, one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace satrap {

// The layer sizes of an MLP: the hidden sizes, then the output size.
inline std::vector<int> mlp_sizes(std::vector<int> hidden, int out) {
  hidden.push_back(out);
  return hidden;
}

class mlp {
 public:
  // in -> sizes[0] -> ... -> sizes.back(); ReLU after every layer but the last, and after the
  // last too when relu_last.
  mlp(int in, std::vector<int> sizes, bool relu_last);

  size_t param_count() const { return param_count_; }
  int in() const { return in_; }
  int out() const { return sizes_.back(); }

  // PyTorch nn.Linear init: W and b uniform(+-1/sqrt(fan_in)), deterministic in seed.
  void init(float* params, uint64_t seed) const;

  // Inverted dropout on the hidden layers' outputs (not the last layer): while `train` is on, a
  // forward zeroes each hidden unit with probability p (by a hash of key, layer and position,
  // so a mask is reproducible) and scales the others by 1/(1-p); backward follows the mask.
  void set_dropout(float p) { dropout_ = p; }
  void train_mode(bool train, uint64_t key) {
    train_ = train;
    key_ = key;
  }

  // Returns the output [batch x out()], valid until the next forward.
  const float* forward(int batch, const float* params, const float* x);
  // The last forward's output (what it returned).
  const float* output() const { return outputs_.back().data(); }
  // After forward on the same x: grads (param_count()) overwritten; dx [batch x in()] unless null.
  void backward(int batch, const float* params, const float* dy, float* grads, float* dx);

 private:
  int in_;
  std::vector<int> sizes_;
  bool relu_last_;
  std::vector<size_t> offsets_;  // per layer: W at offsets_[l], b right after it
  size_t param_count_ = 0;
  const float* x_ = nullptr;  // the last forward's input
  float dropout_ = 0.0f;
  bool train_ = false;
  uint64_t key_ = 0;
  bool dropped_ = false;                     // the last forward applied dropout
  std::vector<std::vector<float>> outputs_;  // per layer, post-activation
  std::vector<float> delta_a_, delta_b_;     // backward scratch
  std::vector<float> wt_;                    // forward scratch: a small layer's W^T
};

}  // namespace satrap
