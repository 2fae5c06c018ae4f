// dense_trainer: one replica of the dense network; drives the step loop of its batches.
//
// Trainer `rank` of `world` owns global batches n = step*world + rank. For each step it
//   1. fetches the dense part from loader[n % L] and the pooled embeddings from
//      aggregator[n % A] (the loader has sent that aggregator the ids),
//   2. runs forward/backward with the loss scaled by 1/(batch_size*world),
//   3. all-reduces the dense gradients with the other trainers and steps its dense optimizer:
//      CPU trainers pass a ring of chunk messages (reduce-scatter then all-gather, so every
//      replica gets bit-identical sums); GPU trainers (`cuda`) all-reduce on the device over NCCL
//      (device_allreduce.hpp): at `run`, trainer 0 makes the communicator's unique id of the
//      plan's generation and sends it to every other trainer in a comm_id message; each joins on
//      its own device without blocking and polls (tick, every comm_poll) until joined and, per
//      step, until its all-reduce is done. A generation's communicator dies with its trainers
//      (ncclCommAbort) and the next generation's trainers make a new one,
//   4. sends the gradients of the pooled embeddings to the aggregator; its reply means the shards
//      applied them, and the trainer tells every trainer `applied(step, rank)`.
// Bounded staleness K: the lookup of step s starts only once steps <= s-K-1 are applied on every
// trainer, so a lookup misses the gradients of at most K earlier steps; K = 0 is fully synchronous.
// After the last step is applied everywhere, each trainer evaluates its share of the test batches
// and answers `run` with a trainer_report (samples and losses since the last cut).
// Checkpoint cuts: no lookup of a step >= the cut starts; once every step below it is applied
// everywhere, the trainer sends a cut_report to the progress sink and waits. `cut(next)` moves the
// cut on (-1: none) and training continues. `hold()` freezes fetching where it is and answers the
// next step it would fetch (the supervisor then picks a cut for an on-demand checkpoint).
// `restore(DenseState)` before `run` loads the model and optimizer state of a checkpoint; at a
// cut it loads a kept best model (early stopping).
// Validation: `eval(batches)` while the trainer waits at a cut evaluates its share (by rank) of
// the first `batches` validation batches with the embeddings read-only and answers an
// EvalResult. The cut step equal to plan.steps holds the trainer after its last step (before the
// test evaluation) for a final validation. `cut(-2)` ends training at the cut: the trainer
// evaluates the test batches and answers `run`.
// Threading: an actor. Requests carry timeouts; a failure fails the run with the reason.
#pragma once

#include "actors/data_loader/data_loader.hpp"
#include "actors/dense_trainer/device_allreduce.hpp"
#include "actors/gradient_aggregator/gradient_aggregator.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/model_zoo.hpp"
#include "runtime/atoms.hpp"
#include "runtime/payload.hpp"

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/actor_system.hpp>
#include <caf/duration.hpp>
#include <caf/expected.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <vector>

namespace satrap {

// (generation, unique id): the NCCL communicator's id, from trainer 0 to the other GPU trainers.
using comm_id_atom = caf::atom_constant<caf::atom("comm_id")>;

struct train_plan {
  int64_t steps = 0;         // steps to train (batches per trainer)
  int64_t test_batches = 0;  // test batches of the whole job, shared among trainers by rank
  int32_t staleness = 0;     // K, see above
  int64_t first_step = 0;    // steps before it are done (a restore from a checkpoint)
  int64_t cut = -1;          // the first checkpoint cut (see below); -1: none
  uint64_t generation = 1;   // the supervisor's generation: one NCCL communicator per generation
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, train_plan& x) {
  return f(caf::meta::type_name("train_plan"), x.steps, x.test_batches, x.staleness, x.first_step,
           x.cut, x.generation);
}

// Sent by every trainer to the progress sink when it reaches a cut: every step < `step` is
// applied on the shards everywhere and no lookup of a later step has started.
struct cut_report {
  int32_t rank = 0;
  int64_t step = 0;
  int64_t samples = 0;              // training samples since the previous cut (or the start)
  std::vector<double> step_losses;  // per step since the previous cut
  capnp_payload state;              // DenseState (rank 0 only; replicas are identical)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cut_report& x) {
  return f(caf::meta::type_name("cut_report"), x.rank, x.step, x.samples, x.step_losses, x.state);
}

// cut(kStopAtCut): end training at the cut (see above).
constexpr int64_t stop_at_cut = -2;

// Sent every few steps to the progress sink (the job supervisor).
struct progress_report {
  int32_t rank = 0;
  int64_t step = 0;          // steps done by this trainer
  int64_t samples = 0;       // samples since the previous report
  double loss_sum = 0.0;     // sum of per-sample losses since the previous report
  double running_auc = 0.5;  // AUC over this trainer's recent training predictions
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, progress_report& x) {
  return f(caf::meta::type_name("progress_report"), x.rank, x.step, x.samples, x.loss_sum,
           x.running_auc);
}

struct trainer_report {
  int32_t rank = 0;
  int64_t samples = 0;              // training samples seen
  std::vector<double> step_losses;  // per step: sum of this trainer's per-sample losses
  capnp_payload eval;               // EvalResult on this trainer's test batches
  int64_t steps = 0;                // steps trained (less than the plan's when stopped early)
  capnp_payload params;             // DenseParams after the last step
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trainer_report& x) {
  return f(caf::meta::type_name("trainer_report"), x.rank, x.samples, x.step_losses, x.eval,
           x.steps, x.params);
}

using progress_sink_actor = caf::typed_actor<
  caf::reacts_to<progress_atom, progress_report>, caf::reacts_to<cut_atom, cut_report>,
  caf::reacts_to<applied_atom, uint64_t, int64_t, int32_t>>;  // (generation, step, rank)

using dense_trainer_actor = caf::typed_actor<
  caf::reacts_to<peers_atom, std::vector<caf::actor>>,  // every trainer, by rank (self included)
  caf::reacts_to<chunk_atom, capnp_payload>,            // DenseChunk from the previous rank
  caf::reacts_to<applied_atom, int64_t, int32_t>,       // (step, rank) applied on the shards
  caf::reacts_to<comm_id_atom, uint64_t, std::string>,  // GPU trainers: (generation, NCCL id)
  caf::reacts_to<cut_atom, int64_t>,                    // the next cut (-1: none)
  caf::replies_to<hold_atom>::with<int64_t>,            // freeze fetching; -> next step to fetch
  caf::replies_to<restore_atom, capnp_payload>::with<int64_t>,  // DenseState -> its step
  caf::replies_to<eval_atom, int64_t>::with<capnp_payload>,     // validation batches -> EvalResult
  caf::replies_to<run_atom, train_plan>::with<trainer_report>>;

struct dense_trainer_config {
  int32_t rank = 0;                                    // this replica
  int32_t world = 1;                                   // replicas in the job
  dense_model_config model;                            // network type and shape
  dense_optimizer_options optimizer;                   // dense optimizer
  uint64_t seed = 7;                                   // same on every replica: same initial model
  int32_t batch_size = 512;                            // samples per batch
  std::vector<data_loader_actor> loaders;              // every loader of the job
  std::vector<gradient_aggregator_actor> aggregators;  // every aggregator of the job
  progress_sink_actor progress;                        // may be null
  int32_t progress_every = 20;                         // steps between progress reports
  // Threads of the dense step (CPU trainers): the batch is split over them, each part with
  // OpenBLAS at 1 thread (models/dense/batch_split.hpp), while this is the only trainer in its
  // process (models/dense/blas_threads.hpp); resolved from training.blas_threads.
  int32_t blas_threads = 1;
  size_t auc_window = 100000;  // predictions in the running AUC
  // New predictions before the window is re-sorted: once per window turned over. The sort runs
  // in the trainer, on the step's critical path (1-1.5 ms per 100,000 here); at 25,000 it was
  // ~2.5% of the default job's CPU (tests/bench/README.md, pipeline_overhead).
  size_t auc_refresh = 100000;
  int32_t eval_window = 4;                           // test batches in flight at once
  caf::duration timeout{std::chrono::seconds(120)};  // per request
  std::string job;                                   // the job's name (status endpoint)
  bool cuda = false;                                 // the dense model on CUDA device rank % GPUs
  // GPU trainers: how often the trainer polls its NCCL communicator (join, all-reduce) while it
  // waits. Short against a step (milliseconds on a GPU): the poll is one cheap status query.
  std::chrono::microseconds comm_poll{100};
  // The device all-reduce's communicators: null means NCCL for `cuda` trainers (world > 1) and
  // the actor ring for CPU trainers; a test sets a fake to run the device flow on the CPU.
  std::shared_ptr<const device_comm_factory> comm_factory;
};

// Fails (with the reason) when the model cannot be made: `cuda` without a CUDA build, without a
// device, or for a model the CUDA path does not have; a precision other than fp32 on the CPU.
caf::expected<dense_trainer_actor> spawn_dense_trainer(caf::actor_system& sys,
                                                       dense_trainer_config config);

}  // namespace satrap
