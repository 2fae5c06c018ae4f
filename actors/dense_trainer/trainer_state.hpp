// The dense trainer's state and the functions of its behaviour, shared by its .cpp files (internal
// to actors/dense_trainer/; the protocol is in dense_trainer.hpp):
//   dense_trainer.cpp  the behaviour, `run`, fetching, progress, the applied-steps count
//   trainer_step.cpp   one training step: decode, forward/backward, all-reduce (actor ring on CPU
//                      trainers, NCCL through device_allreduce on GPU trainers), optimizer, push
//   trainer_optimizer.cpp  the dense optimizer step (host, or the device for GPU trainers)
//   trainer_cuts.cpp   checkpoint cuts, the dense state, restore
//   trainer_eval.cpp   test and validation passes
// The state is split by concern: the step pipeline (step_loop), the all-reduce (allreduce_state,
// over the plain state machines ring_allreduce and device_allreduce), checkpoint cuts (cut_state)
// and evaluation (eval_state), each a struct the trainer state owns. The trainer's own timer
// messages (tick, watch) are on dense_trainer_impl, a private extension of its public handle.
// Threading: everything here runs inside the trainer actor.
#pragma once

#include "actors/dense_trainer/dense_trainer.hpp"
#include "actors/dense_trainer/device_allreduce.hpp"
#include "actors/dense_trainer/ring_allreduce.hpp"
#include "models/dense/blas_threads.hpp"
#include "models/metrics.hpp"
#include "runtime/actor_meter.hpp"
#include "runtime/batch_key.hpp"
#include "runtime/error.hpp"
#include "runtime/payload_checks.hpp"
#include "runtime/request_watch.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <deque>
#include <functional>
#include <map>
#include <optional>

#ifdef SATRAP_HAVE_CUDA
namespace satrap {
class cuda_dense_model;
}
#endif

namespace satrap::trainer_detail {

// The two halves of one batch, as they arrive.
struct batch_inputs {
  std::optional<capnp_payload> dense;
  std::optional<capnp_payload> pooled;
  bool ready() const { return dense && pooled; }
};

// One evaluation pass over a list of batches of one split.
struct eval_run {
  data_split split = data_split::test;
  std::vector<int64_t> batches;
  size_t next = 0;
  size_t done = 0;
  std::map<int64_t, batch_inputs> inputs;
  std::vector<float> logits, labels, probs;
  std::vector<uint64_t> groups;
  std::function<void()> on_done;  // runs once every batch is in
  capnp_payload result() const;
};

// The step pipeline: fetching, computing, and which steps are applied where.
struct step_loop {
  int64_t next_fetch = 0;
  int64_t next_compute = 0;
  int64_t global_applied = -1;  // every step <= this is applied on every trainer
  std::map<int64_t, int32_t> applied_count;
  std::map<int64_t, batch_inputs> inputs;
  capnp_payload pending_grads;  // PooledGradients of the step being all-reduced
  // Staleness 0 with world > 1: rank r > 0 pushes a step's embedding gradients only once rank
  // r - 1's are applied, so every shard applies one step's batches in rank order and a
  // synchronous multi-trainer run is bit-reproducible (Adagrad's result depends on the order).
  int64_t prev_rank_applied = -1;  // the newest step rank - 1 reported applied
  std::optional<std::pair<int64_t, capnp_payload>> held_push;  // (step, its PooledGradients)
  std::vector<float> logits;
};

// The dense all-reduce among the replicas (world > 1).
struct allreduce_state {
  std::optional<ring_allreduce> ring;         // CPU trainers
  std::deque<capnp_payload> inbox;            // chunks that arrived before their all-reduce started
  std::optional<device_allreduce> device_ar;  // GPU trainers
  bool comm_polling = false;                  // a tick to poll device_ar is scheduled
};

// Checkpoint cuts (cut, hold): where the supervisor stops this trainer's fetching.
struct cut_state {
  int64_t step = -1;      // no fetch of a step >= this (-1: none)
  bool reported = false;  // the cut_report for `step` is sent
};

// Evaluation: the test pass after the last step, a validation pass at a cut.
struct eval_state {
  eval_run test;  // this trainer's test batches, after the last step
  bool test_started = false;
  std::optional<eval_run> validation;  // a validation pass at a cut
  std::vector<float> trained_params;   // the trained weights while a validation reads their average
};

struct trainer_state {
  dense_trainer_config config;
  std::unique_ptr<dense_model> model;
  size_t param_count = 0;  // the model's
  std::unique_ptr<dense_optimizer> optimizer;
  std::vector<dense_trainer_actor> peers;
  allreduce_state ar;  // (after model: its device communicator is freed first)
  train_plan plan;
  std::optional<caf::typed_response_promise<trainer_report>> done;
  bool failed = false;
  step_loop loop;
  cut_state cuts;
  // Progress.
  std::unique_ptr<running_auc> auc;
  progress_report progress;
  trainer_report report;
  eval_state eval;
  meter_handle meter;             // for the status endpoint
  blas_threads_lease blas_lease;  // intra-op BLAS threads only while the only trainer here
  request_watch watch;            // deadlines of the requests to loaders and aggregators
  static inline const char* name = "dense_trainer";
};

// The trainer's own timer messages, which no other actor sends: not on the public handle.
using dense_trainer_impl = dense_trainer_actor::extend<
  caf::reacts_to<tick_atom>,    // GPU trainers: poll the communicator (every comm_poll)
  caf::reacts_to<watch_atom>>;  // request deadlines (request_watch.hpp)

using self_ptr = dense_trainer_impl::stateful_pointer<trainer_state>;

// The two halves of batch n as the trainer needs them, checked against each other and the model.
struct batch_views {
  dense_batch_view dense;
  pooled_view pooled;
};

caf::expected<batch_views> decode_inputs(const trainer_state& st, const batch_inputs& in, int64_t n,
                                         int8_t split);

inline int64_t global_batch(const trainer_state& st, int64_t step) {
  return step * st.config.world + st.config.rank;
}

// dense_trainer.cpp
void fail(self_ptr self, const std::string& what, const caf::error& e);
void issue_fetches(self_ptr self);
void report_progress(trainer_state& st, int64_t samples, double loss_sum, bool force);
void on_applied(self_ptr self, int64_t step);
// Rank `rank` applied `step` (a peer's message): releases a held push, then on_applied.
void on_peer_applied(self_ptr self, int64_t step, int32_t rank);
// trainer_step.cpp
void try_compute(self_ptr self);
void drain_inbox(self_ptr self);
void comm_open(self_ptr self);  // at `run`: rank 0 opens the plan's generation
void on_comm_id(self_ptr self, uint64_t generation, const std::string& id);
void on_comm_tick(self_ptr self);
void drop_staged(trainer_state& st);  // GPU trainers: forget staged batches (run, restore)
// trainer_optimizer.cpp: the dense optimizer's step (on the device for GPU trainers) and, for
// GPU trainers, its state between the device and `optimizer` (checkpoints, restore)
caf::error optimizer_step(trainer_state& st);
#ifdef SATRAP_HAVE_CUDA
cuda_dense_model* cuda_model(trainer_state& st);  // the trainer's GPU model, or nullptr on CPU
#endif
caf::error optimizer_state_to_host(trainer_state& st);
caf::error optimizer_state_to_device(trainer_state& st);
// trainer_cuts.cpp
void check_cut(self_ptr self);
void on_cut(self_ptr self, int64_t next);
caf::result<int64_t> on_restore(self_ptr self, const capnp_payload& state);
// trainer_eval.cpp
capnp_payload make_params(const trainer_state& st);
void eval_issue(self_ptr self, eval_run* e);
void start_test(self_ptr self);
caf::typed_response_promise<capnp_payload> on_validate(self_ptr self, int64_t batches);

// are in `slot`.
template <class Slots, class OnReady>
void fetch_batch(self_ptr self, Slots* slots, int64_t key, int64_t n, int8_t split,
                 OnReady on_ready) {
  auto& st = self->state;
  auto& loader = st.config.loaders[static_cast<size_t>(n) % st.config.loaders.size()];
  auto& agg = st.config.aggregators[aggregator_for_batch(n, st.config.aggregators.size())];
  auto on_error = [self, n](const caf::error& e) {
    fail(self, "fetching batch " + std::to_string(n), e);
  };
  // One half of the batch arrived (`half` is dense or pooled): compute once both are in.
  auto arrived = [slots, key, on_ready](std::optional<capnp_payload> batch_inputs::*half) {
    return [slots, key, on_ready, half](capnp_payload& p) {
      auto& in = (*slots)[key];
      in.*half = std::move(p);
      if (in.ready())
        on_ready();
    };
  };
  watched_request<capnp_payload>(self, st.watch, loader, st.config.timeout,
                                 arrived(&batch_inputs::dense), on_error, fetch_atom::value, n,
                                 split);
  watched_request<capnp_payload>(self, st.watch, agg, st.config.timeout,
                                 arrived(&batch_inputs::pooled), on_error, pooled_atom::value, n,
                                 split);
}

}  // namespace satrap::trainer_detail
