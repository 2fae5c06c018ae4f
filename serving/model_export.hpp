// Writing a model folder (models/serving/: the format) from what a job leaves: its finalised spec,
// its dense parameters and an embedding snapshot. Used by `satrap export` (from a checkpoint) and
// `satrap train --export` (from the job's final model).
// Threading: blocks the calling thread while it writes.
#pragma once

#include "models/env.hpp"
#include "spec/job_spec.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <span>
#include <string>

namespace satrap {

// The model folder `out` (new or empty); answers the embedding rows written. The folder's stamp
// (created_ns) is read from env's wall clock.
// Why `spec`'s model cannot be exported yet ("" when it can): serving pools every slot by
// model.pooling without weights and hashes a request's ids by slot, so a job with named features
// (data.features) or value weights would score differently there than in training.
std::string export_unsupported(const job_spec& spec);

caf::expected<uint64_t> export_model_folder(const job_spec& spec, std::span<const float> params,
                                            int64_t step, const std::string& snapshot_root,
                                            uint64_t sequence, const std::string& out,
                                            uint32_t shards, const std::string& version,
                                            env& e = default_env());

}  // namespace satrap
