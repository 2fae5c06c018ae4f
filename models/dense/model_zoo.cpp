#include "models/dense/model_zoo.hpp"

#include "models/dense/interaction.hpp"

namespace satrap {

const char* dense_model_type_name(dense_model_type type) {
  switch (type) {
    case dense_model_type::dlrm: return "dlrm";
    case dense_model_type::dcn_v2: return "dcn_v2";
    case dense_model_type::deepfm: return "deepfm";
    case dense_model_type::wide_deep: return "wide_deep";
  }
  return "?";
}

const char* dense_precision_name(dense_precision p) {
  switch (p) {
    case dense_precision::fp32: return "fp32";
    case dense_precision::bf16: return "bf16";
    case dense_precision::fp16: return "fp16";
  }
  return "?";
}

std::unique_ptr<dense_model> make_dense_model(const dense_model_config& config, uint64_t seed) {
  switch (config.type) {
    case dense_model_type::dlrm: return make_dlrm(config, seed);
    case dense_model_type::dcn_v2: return make_dcn_v2(config, seed);
    case dense_model_type::deepfm: return make_deepfm(config, seed);
    case dense_model_type::wide_deep: return make_wide_deep(config, seed);
  }
  return nullptr;
}

uint64_t dense_model_param_count(const dense_model_config& c) {
  uint64_t total = 0;
  auto linear = [&](uint64_t in, uint64_t out) { total += in * out + out; };
  auto mlp = [&](int in, const std::vector<int>& hidden, int out) {
    for (int h : hidden) {
      linear(in, h);
      in = h;
    }
    linear(in, out);
  };
  mlp(c.dense_features, c.bottom, c.dim);
  const int fields = (c.slots + 1) * c.dim;  // [bottom(dense), e_1..e_slots]
  switch (c.type) {
    case dense_model_type::dlrm:
      mlp(dlrm_top_input(c), c.top, 1);
      break;
    case dense_model_type::dcn_v2:
      for (int l = 0; l < c.cross_layers; ++l) linear(fields, fields);
      mlp(fields, c.top, 1);
      break;
    case dense_model_type::deepfm:
      linear(fields, 1);
      mlp(fields, c.top, 1);
      break;
    case dense_model_type::wide_deep:
      linear(static_cast<uint64_t>(c.dense_features) + static_cast<uint64_t>(c.slots) * c.dim, 1);
      mlp(fields, c.top, 1);
      break;
  }
  return total;
}

}  // namespace satrap
