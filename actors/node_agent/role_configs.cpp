#include "actors/node_agent/role_configs.hpp"

#include "models/dense/blas_threads.hpp"

namespace satrap {

embedding_shard_config shard_config(const job_spec& spec, int32_t index) {
  embedding_shard_config c;
  c.shard = index;
  c.embedding = spec.model.embedding;
  c.tier = spec.model.tier;
  c.shards = spec.placement.shards;
  c.partitions = spec.placement.partitions;
  c.job = spec.name;
  c.trainers = spec.placement.trainers;
  c.staleness = spec.training.staleness;
  return c;
}

gradient_aggregator_config aggregator_config(const job_spec& spec, int32_t index,
                                             std::vector<embedding_shard_actor> shards) {
  gradient_aggregator_config c;
  c.index = index;
  c.dim = spec.model.network.dim;
  c.pool = spec.model.pool;
  c.slot_pool = job_slot_pooling(spec);
  c.partitions = partition_map::uniform(static_cast<uint32_t>(spec.placement.partitions),
                                        static_cast<uint32_t>(shards.size()));
  c.shards = std::move(shards);
  c.job = spec.name;
  c.timeout = caf::duration{ms(spec.timing.shard_request_timeout_ms)};
  return c;
}

dense_trainer_config trainer_config(const job_spec& spec, int32_t rank,
                                    std::vector<data_loader_actor> loaders,
                                    std::vector<gradient_aggregator_actor> aggregators,
                                    progress_sink_actor progress, int cores) {
  dense_trainer_config c;
  c.rank = rank;
  c.world = spec.placement.trainers;
  c.model = spec.model.network;
  c.optimizer = spec.model.dense;
  c.seed = spec.training.seed;
  c.batch_size = spec.training.batch_size;
  c.loaders = std::move(loaders);
  c.aggregators = std::move(aggregators);
  c.progress = std::move(progress);
  c.progress_every = spec.training.progress_every;
  c.blas_threads = spec.training.blas_threads > 0 ? spec.training.blas_threads
                                                  : auto_blas_threads(spec.model.network, cores);
  c.job = spec.name;
  c.cuda = spec.training.device == dense_device::cuda;
  c.timeout = caf::duration{ms(spec.timing.trainer_request_timeout_ms)};
  return c;
}

}  // namespace satrap
