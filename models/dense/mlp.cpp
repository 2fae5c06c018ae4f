#include "models/dense/mlp.hpp"

#include <cassert>
#include <cmath>

#include "models/dense/linear.hpp"
#include "models/dense/relu.hpp"
#include "models/embedding/id_map.hpp"

namespace satrap {

mlp::mlp(int in, std::vector<int> sizes, bool relu_last)
    : in_(in), sizes_(std::move(sizes)), relu_last_(relu_last) {
  assert(in_ > 0 && !sizes_.empty());
  int fan_in = in_;
  for (int out : sizes_) {
    assert(out > 0);
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
    linear_forward(batch, fan_in, out, input, w, b, y.data());
    if (l + 1 < sizes_.size() || relu_last_) relu_forward(y.size(), y.data(), y.data());
    if (dropped_ && l + 1 < sizes_.size()) {
      const uint64_t layer_key = mix64(key_ ^ mix64(l + 0x0d20f0)) ;
      for (size_t i = 0; i < y.size(); ++i)
        y[i] = (mix64(layer_key + i * 0x9e3779b97f4a7c15ULL) >> 11) < threshold ? 0.0f : y[i] * keep_scale;
    }
    input = y.data();
    fan_in = out;
  }
  return input;
}

void mlp::backward(int batch, const float* params, const float* dy, float* grads, float* dx) {
  size_t layers = sizes_.size();
  size_t n_out = static_cast<size_t>(batch) * sizes_.back();
  delta_a_.assign(dy, dy + n_out);
  if (relu_last_) relu_backward(n_out, outputs_.back().data(), delta_a_.data(), delta_a_.data());
  for (size_t l = layers; l-- > 0;) {
    int out = sizes_[l];
    int fan_in = l == 0 ? in_ : sizes_[l - 1];
    const float* input = l == 0 ? x_ : outputs_[l - 1].data();
    const float* w = params + offsets_[l];
    float* dw = grads + offsets_[l];
    float* db = dw + static_cast<size_t>(out) * fan_in;
    float* dinput = dx;
    if (l > 0) {
      delta_b_.resize(static_cast<size_t>(batch) * fan_in);
      dinput = delta_b_.data();
    }
    linear_backward(batch, fan_in, out, input, w, delta_a_.data(), dinput, dw, db);
    if (l > 0) {
      relu_backward(delta_b_.size(), outputs_[l - 1].data(), delta_b_.data(), delta_b_.data());
      if (dropped_) {  // dropped units are 0 (relu_backward zeroed them); kept ones were scaled
        const float keep_scale = 1.0f / (1.0f - dropout_);
        for (auto& d : delta_b_) d *= keep_scale;
      }
      std::swap(delta_a_, delta_b_);
    }
  }
}

}  // namespace satrap
