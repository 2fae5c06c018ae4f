#include "models/dense/mlp.hpp"
#include "models/assert.hpp"

#include <cmath>

#include "models/dense/linear.hpp"
#include "models/dense/relu.hpp"
#include "models/embedding/id_map.hpp"

namespace satrap {

mlp::mlp(int in, std::vector<int> sizes, bool relu_last)
    : in_(in), sizes_(std::move(sizes)), relu_last_(relu_last) {
  SATRAP_ASSERT(in_ > 0 && !sizes_.empty());
  int fan_in = in_;
  for (int out : sizes_) {
    SATRAP_ASSERT(out > 0);
    offsets_.push_back(param_count_);
    param_count_ += static_cast<size_t>(out) * fan_in + out;
    fan_in = out;
  }
  outputs_.resize(sizes_.size());
}

void mlp::init(float* params, uint64_t seed) const {
  int fan_in = in_;
  uint64_t base = mix64(seed ^ 0xa0761d6478bd642fULL);
  for (size_t l = 0; l < sizes_.size(); ++l) {
    double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    size_t count = static_cast<size_t>(sizes_[l]) * fan_in + sizes_[l];
    for (size_t i = 0; i < count; ++i) {
      uint64_t r = mix64(base + (offsets_[l] + i) * 0x9e3779b97f4a7c15ULL);
      double u = static_cast<double>(r >> 11) * 0x1.0p-53;
      params[offsets_[l] + i] = static_cast<float>((2.0 * u - 1.0) * bound);
    }
    fan_in = sizes_[l];
  }
}

const float* mlp::forward(int batch, const float* params, const float* x) {
  x_ = x;
  dropped_ = train_ && dropout_ > 0.0f;
  const auto threshold = static_cast<uint64_t>(static_cast<double>(dropout_) * 9007199254740992.0);
  const float keep_scale = dropped_ ? 1.0f / (1.0f - dropout_) : 1.0f;
  const float* input = x;
  int fan_in = in_;
  for (size_t l = 0; l < sizes_.size(); ++l) {
    int out = sizes_[l];
    std::vector<float>& y = outputs_[l];
    y.resize(static_cast<size_t>(batch) * out);
    const float* w = params + offsets_[l];
    const float* b = w + static_cast<size_t>(out) * fan_in;
    wt_.resize(static_cast<size_t>(out) * fan_in);
    linear_forward_relu(batch, fan_in, out, input, w, b, l + 1 < sizes_.size() || relu_last_,
                        y.data(), wt_.data());
    if (dropped_ && l + 1 < sizes_.size()) {
      const uint64_t layer_key = mix64(key_ ^ mix64(l + 0x0d20f0));
      for (size_t i = 0; i < y.size(); ++i)
        y[i] = (mix64(layer_key + i * 0x9e3779b97f4a7c15ULL) >> 11) < threshold ? 0.0f
                                                                                : y[i] * keep_scale;
    }
    input = y.data();
    fan_in = out;
  }
  return input;
}

// Each layer's bias gradient comes from the pass that makes its output's gradient: the last
// layer's from dy (or dy through the last ReLU), every other layer's from the next layer's input
// gradient, in the pass that applies the ReLU mask and the dropout scale
// (linear_backward_relu_input): one pass over each gradient instead of three.
void mlp::backward(int batch, const float* params, const float* dy, float* grads, float* dx) {
  const size_t layers = sizes_.size();
  const size_t n_out = static_cast<size_t>(batch) * sizes_.back();
  auto bias_grad = [&](size_t l) {
    const int fan_in = l == 0 ? in_ : sizes_[l - 1];
    return grads + offsets_[l] + static_cast<size_t>(sizes_[l]) * fan_in;
  };
  const float* delta = dy;  // the gradient at layer l's output
  if (relu_last_) {
    delta_a_.resize(n_out);
    relu_backward(n_out, outputs_.back().data(), dy, delta_a_.data());
    delta = delta_a_.data();
  }
  linear_bias_grad(batch, sizes_.back(), delta, bias_grad(layers - 1));
  const float keep_scale = dropped_ ? 1.0f / (1.0f - dropout_) : 1.0f;
  for (size_t l = layers; l-- > 0;) {
    const int out = sizes_[l];
    const int fan_in = l == 0 ? in_ : sizes_[l - 1];
    const float* w = params + offsets_[l];
    float* dw = grads + offsets_[l];
    if (l == 0) {
      linear_backward_weights(batch, fan_in, out, x_, w, delta, dx, dw);
      break;
    }
    // The input gradient goes to whichever scratch buffer delta is not.
    std::vector<float>& next = delta == delta_a_.data() ? delta_b_ : delta_a_;
    next.resize(static_cast<size_t>(batch) * fan_in);
    // Dropped units are 0 in outputs_[l - 1], so the mask drops them; kept ones were scaled.
    linear_backward_relu_input(batch, fan_in, out, outputs_[l - 1].data(), w, delta, keep_scale,
                               next.data(), dw, bias_grad(l - 1));
    delta = next.data();
  }
}

}  // namespace satrap
