// gradient_aggregator: the sparse half of a step, between the loaders, the shards and a trainer.
//
// Protocol (payloads from schemas/step.capnp):
//   ids(IdBatch)               from a data_loader: de-duplicate the ids, look them up on their
//                              owning shards (ids -> virtual partitions -> shards), pool them
//                              (each slot by its pooling, with the batch's per-id weights when
//                              it carries them). Ids of features that share a table are one id
//                              space, so a row used by several features is looked up once and
//                              its gradient is the sum of every use's.
//   pooled(batch, split)       -> PooledEmbeddings of that batch, as soon as they are ready.
//   grads(PooledGradients)     scatter onto the unique ids, sum per id, push to the shards;
//                              replies with the number of rows updated once every shard has
//                              applied its part (that reply frees the trainer's staleness slot).
// A test-split batch is forgotten once its pooled embeddings are delivered.
// Threading: an actor. Every request it makes carries a timeout; a failure is answered as an
// error to the requester, never dropped.
#pragma once

#include "actors/embedding_shard/embedding_shard.hpp"
#include "models/embedding/pooling.hpp"
#include "runtime/atoms.hpp"
#include "runtime/partition_map.hpp"
#include "runtime/payload.hpp"

#include <caf/actor_system.hpp>
#include <caf/duration.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <vector>

namespace satrap {

using gradient_aggregator_actor =
  caf::typed_actor<caf::reacts_to<ids_atom, capnp_payload>,
                   caf::replies_to<pooled_atom, int64_t, int8_t>::with<capnp_payload>,
                   caf::replies_to<grads_atom, capnp_payload>::with<int64_t>>;
// (Its own timer, the shard requests' deadlines, is on a private extension: gradient_aggregator.cpp.)

struct gradient_aggregator_config {
  int32_t index = 0;               // index of this aggregator in the job
  int32_t dim = 16;                // embedding size
  pooling pool = pooling::sum;     // how a bag's rows become one vector
  std::vector<pooling> slot_pool;  // per slot (named features, job_slot_pooling); empty: `pool`
  std::vector<embedding_shard_actor> shards;        // every shard of the job
  partition_map partitions;                         // id -> shard
  caf::duration timeout{std::chrono::seconds(60)};  // per request to a shard
  std::string job;                                  // the job's name (status endpoint)
};

gradient_aggregator_actor spawn_gradient_aggregator(caf::actor_system& sys,
                                                    const gradient_aggregator_config& config);

}  // namespace satrap
