// The config of each role's actor, derived from the job spec: one place, used by the node agent
// that spawns the actor (embedded or on a remote node).
#pragma once

#include "actors/dense_trainer/dense_trainer.hpp"
#include "spec/job_spec.hpp"

namespace satrap {

embedding_shard_config shard_config(const job_spec& spec, int32_t index);

gradient_aggregator_config aggregator_config(const job_spec& spec, int32_t index,
                                             std::vector<embedding_shard_actor> shards);

// cores: the process's (its scheduler threads), for training.blas_threads = 0 (auto).
dense_trainer_config trainer_config(const job_spec& spec, int32_t rank,
                                    std::vector<data_loader_actor> loaders,
                                    std::vector<gradient_aggregator_actor> aggregators,
                                    progress_sink_actor progress, int cores = 1);

}  // namespace satrap
