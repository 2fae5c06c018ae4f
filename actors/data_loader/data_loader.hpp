// data_loader: makes batches and splits them between the sparse and the dense side.
//
// Protocol:
//   fetch(batch, split) -> DenseBatch (dense features, labels, teacher probabilities), and, before
//                          replying, sends the batch's IdBatch to aggregator[batch % A] (see
//                          aggregator_for_batch), where the trainer asks for the pooled embeddings.
// Loaders are stateless over batch numbers (the batch_source makes any batch on demand: the
// synthetic generator, or file data read from its binary cache), so any loader can serve any
// batch and a restarted loader resumes by batch number alone: that number is its read position.
// Read-ahead: after answering a training fetch of batch n, a loader makes the next `read_ahead`
// training batches it will be asked for (n + loaders, n + 2 * loaders, ...) while the trainer
// computes, so data generation is off the step's critical path (the default job ran 1.2x faster
// with a deeper window, tests/bench/README.md). Only the making runs ahead: a batch's IdBatch
// still goes to its aggregator when the batch is fetched, so its lookups stay within the
// staleness bound. Batches are a pure function of their number, so a read-ahead batch is the
// one a fetch would make.
// Threading: an actor; the generator is immutable and shared.
#pragma once

#include "actors/gradient_aggregator/gradient_aggregator.hpp"
#include "models/data/batch_source.hpp"
#include "runtime/atoms.hpp"
#include "runtime/payload.hpp"

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <memory>
#include <vector>

namespace satrap {

using data_loader_actor =
  caf::typed_actor<caf::replies_to<fetch_atom, int64_t, int8_t>::with<capnp_payload>>;

// Batch n of either split goes to this aggregator (trainer and loader must agree).
inline size_t aggregator_for_batch(int64_t batch, size_t aggregators) {
  return static_cast<size_t>(batch) % aggregators;
}

struct data_loader_config {
  int32_t index = 0;                         // index of this loader in the job
  std::shared_ptr<const batch_source> data;  // where batches come from (shared, immutable)
  int32_t batch_size = 512;                  // samples per batch (per trainer)
  std::vector<gradient_aggregator_actor> aggregators;  // every aggregator of the job
  std::string job;                                     // the job's name (status endpoint)
  int32_t group_by = -1;   // evaluation batches carry this slot's ids (-1: none)
  int32_t loaders = 1;     // loaders in the job: this one gets every loaders-th batch
  int32_t read_ahead = 2;  // training batches made ahead of their fetch (0: none)
};

data_loader_actor spawn_data_loader(caf::actor_system& sys, const data_loader_config& config);

}  // namespace satrap
