#include "serving/model_export.hpp"

#include "models/serving/exported_model.hpp"
#include "runtime/error.hpp"
#include "runtime/payload.hpp"
#include "satrap_schemas/step.capnp.h"

#include <chrono>

namespace satrap {

std::string export_unsupported(const job_spec& spec) {
  if (spec.data.format.value_weights && !spec.data.crosses.empty())
    return "export: a job with data.value_weights and data.crosses cannot be exported yet (a "
           "request's crossed ids would need weights; README \"Not yet\"); train without --export";
  if (spec.data.synthetic.history > 0 && spec.data.source == data_source::synthetic)
    return "export: a job with a synthetic history (data.synthetic.history) cannot be exported "
           "yet (its history is no named feature a request could give; README \"Not yet\"); "
           "train without --export";
  return "";
}

caf::expected<uint64_t> export_model_folder(const job_spec& spec, std::span<const float> params,
                                            int64_t step, const std::string& snapshot_root,
                                            uint64_t sequence, const std::string& out,
                                            uint32_t shards, const std::string& version, env& e) {
  if (auto why = export_unsupported(spec); !why.empty())
    return make_error(errc::invalid_config, why);
  exported_model_meta meta;
  meta.name = spec.name;
  meta.version = version.empty() ? "step-" + std::to_string(step) : version;
  meta.step = step;
  meta.created_ns = static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::nanoseconds>(e.system_now().time_since_epoch())
      .count());
  meta.network = spec.model.network;
  meta.pool = spec.model.pool;
  meta.embedding = spec.model.embedding;
  meta.partitions = static_cast<uint32_t>(spec.placement.partitions);
  meta.crosses = spec.data.crosses;
  meta.features = spec.data.format.features;
  meta.value_weights = spec.data.format.value_weights;
  const auto tasks = static_cast<size_t>(spec.model.network.tasks);
  meta.labels = spec.data.format.labels;
  if (meta.labels.size() != tasks) {  // data without label names: task_0, task_1, ...
    meta.labels.clear();
    for (size_t k = 0; k < tasks; ++k)
      meta.labels.push_back("task_" + std::to_string(k));
  }
  meta.job_yaml = job_spec_to_yaml(spec);
  auto rows = export_model(out, meta, params, snapshot_root, sequence, shards);
  if (!rows)
    return make_error(errc::io_failure, "export: " + rows.error());
  return rows.value();
}

caf::expected<uint64_t> export_checkpoint(const job_spec& spec, const std::string& checkpoint_dir,
                                          const checkpoint_meta& meta, const std::string& out,
                                          uint32_t shards, const std::string& version, env& e) {
  auto dense = checkpoint_read_dense(checkpoint_dir, meta, e);
  if (!dense)
    return make_error(dense.failure());
  capnp_payload state{payload_bytes(dense->begin(), dense->end())};
  payload_reader reader(state);
  auto params = data_view<float>(reader.root<schema::DenseState>().getParams());
  return export_model_folder(spec, params, meta.step, checkpoint_embedding_root(checkpoint_dir),
                             meta.embedding_sequence, out, shards, version, e);
}

}  // namespace satrap
