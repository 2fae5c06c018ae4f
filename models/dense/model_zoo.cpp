#include "models/dense/model_zoo.hpp"

#include "models/dense/param_blocks.hpp"
#include "models/dense/torchscript.hpp"

namespace satrap {

std::string dense_model_tasks_error(const dense_model_config& config) {
  if (config.tasks < 1)
    return "expected at least one task, got " + std::to_string(config.tasks);
  if (!config.task_weights.empty() && config.task_weights.size() != size_t(config.tasks))
    return "expected " + std::to_string(config.tasks) + " task weights, got "
           + std::to_string(config.task_weights.size());
  if (config.tasks > 1
      && (config.type == dense_model_type::deepfm || config.type == dense_model_type::wide_deep))
    return std::string("model.type ") + dense_model_type_name(config.type)
           + " has one logit (its FM or wide term is one number); several tasks need dlrm, "
             "dcn_v2 or torchscript";
  return "";
}

const char* dense_model_type_name(dense_model_type type) {
  switch (type) {
    case dense_model_type::dlrm: return "dlrm";
    case dense_model_type::dcn_v2: return "dcn_v2";
    case dense_model_type::deepfm: return "deepfm";
    case dense_model_type::wide_deep: return "wide_deep";
    case dense_model_type::torchscript: return "torchscript";
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

result<std::unique_ptr<dense_model>> make_dense_model_checked(const dense_model_config& config,
                                                              uint64_t seed, int threads) {
  if (config.type != dense_model_type::torchscript)
    return make_dense_model(config, seed);
  if (!config.torchscript)
    return make_model_error("model.type torchscript: no module (model.file) was read");
  auto plugin = torchscript_plugin();
  if (!plugin)
    return plugin.failure();
  return (*plugin)->make(config.torchscript,
                         torchscript_contract{config.dense_features, config.slots, config.dim,
                                              config.tasks, config.task_weights, config.sequences},
                         threads, seed);
}

std::unique_ptr<dense_model> make_dense_model(const dense_model_config& config, uint64_t seed) {
  switch (config.type) {
    case dense_model_type::torchscript: {
      auto m = make_dense_model_checked(config, seed);
      SATRAP_ASSERT(m.ok(), "{}", m.ok() ? "" : m.error());
      return std::move(*m);
    }
    case dense_model_type::dlrm: return make_dlrm(config, seed);
    case dense_model_type::dcn_v2: return make_dcn_v2(config, seed);
    case dense_model_type::deepfm: return make_deepfm(config, seed);
    case dense_model_type::wide_deep: return make_wide_deep(config, seed);
  }
  return nullptr;
}

uint64_t dense_model_param_count(const dense_model_config& c) {
  if (c.type == dense_model_type::torchscript)
    return c.torchscript_params;
  uint64_t total = 0;
  for (auto& b : dense_model_blocks(c))
    total += mlp(b.in, b.sizes, false).param_count();
  return total;
}

}  // namespace satrap
