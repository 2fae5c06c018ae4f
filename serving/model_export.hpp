// Writing a model folder (models/serving/: the format) from what a job leaves: its finalised spec,
// its dense parameters and an embedding snapshot. Used by `satrap export` (from a checkpoint) and
// `satrap train --export` (from the job's final model).
// Threading: blocks the calling thread while it writes.
#pragma once

#include "models/checkpoint/job_checkpoint.hpp"
#include "models/env.hpp"
#include "spec/job_spec.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <span>
#include <string>

namespace satrap {

// Why `spec`'s model cannot be exported yet ("" when it can): a synthetic history (no named
// feature a request could give), or value weights with feature crosses.
std::string export_unsupported(const job_spec& spec);

// The model folder `out` (new or empty); answers the embedding rows written. The folder's stamp
// (created_ns) is read from env's wall clock.
caf::expected<uint64_t> export_model_folder(const job_spec& spec, std::span<const float> params,
                                            int64_t step, const std::string& snapshot_root,
                                            uint64_t sequence, const std::string& out,
                                            uint32_t shards, const std::string& version,
                                            env& e = default_env());

// The model at checkpoint `meta` of the job's checkpoint folder `checkpoint_dir` (its dense file
// and embedding snapshot chain) as the model folder `out` (satrap export).
caf::expected<uint64_t> export_checkpoint(const job_spec& spec, const std::string& checkpoint_dir,
                                          const checkpoint_meta& meta, const std::string& out,
                                          uint32_t shards, const std::string& version,
                                          env& e = default_env());

}  // namespace satrap
