// One training step (trainer_state.hpp): decode the batch, forward/backward, all-reduce the dense
// gradients (the actor ring on CPU trainers, NCCL on GPU trainers), step the optimizer, push the
// embedding gradients.
#include "actors/dense_trainer/trainer_state.hpp"
#include "models/assert.hpp"
#include "models/metrics.hpp"
#ifdef SATRAP_HAVE_CUDA
#include "models/cuda/cuda_dense_model.hpp"
#endif
#include "satrap_schemas/step.capnp.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace satrap::trainer_detail {

caf::expected<batch_views> decode_inputs(const trainer_state& st, const batch_inputs& in, int64_t n,
                                         int8_t split) {
  auto dense =
    decode_dense_batch(*in.dense, n, split, static_cast<uint32_t>(st.config.model.dense_features),
                       static_cast<uint32_t>(st.config.model.tasks));
  if (!dense)
    return dense.error();
  if (dense->size > static_cast<uint32_t>(st.config.batch_size))
    return make_error(errc::invalid_payload, "dense batch " + std::to_string(n) + ": "
                                               + std::to_string(dense->size)
                                               + " samples, more than the batch size "
                                               + std::to_string(st.config.batch_size));
  auto pooled = decode_pooled_embeddings(*in.pooled);
  if (!pooled)
    return pooled.error();
  if (auto err = pooled_check_shape(*pooled,
                                    {n, dense->size, static_cast<uint32_t>(st.config.model.slots),
                                     static_cast<uint32_t>(st.config.model.dim)},
                                    "pooled embeddings"))
    return err;
  return batch_views{*dense, *pooled};
}

namespace {

// Pushes the embedding gradients of `step` to its aggregator; once the shards applied them, tells
// the peers and the supervisor, then counts the step applied here.
void push_grads(self_ptr self, int64_t step, capnp_payload grads) {
  auto& st = self->state;
  auto n = global_batch(st, step);
  auto& agg = st.config.aggregators[aggregator_for_batch(n, st.config.aggregators.size())];
  auto on_error = [self, n](const caf::error& e) {
    fail(self, "pushing gradients of batch " + std::to_string(n), e);
  };
  watched_request<int64_t>(
    self, st.watch, agg, st.config.timeout,
    [self, step](int64_t) {
      auto& st = self->state;
      for (int32_t r = 0; r < st.config.world; ++r)
        if (r != st.config.rank)
          self->send(st.peers[static_cast<size_t>(r)], applied_atom::value, step, st.config.rank);
      if (st.config.progress)  // the supervisor counts exactly what a rollback replays
        self->send(st.config.progress, applied_atom::value, st.plan.generation, step,
                   st.config.rank);
      on_applied(self, step);
    },
    on_error, grads_atom::value, std::move(grads));
}

}  // namespace

// Steps the dense optimizer and pushes the embedding gradients of step `next_compute` (at
// staleness 0, rank r > 0 holds them until rank r - 1's are applied: trainer_state::held_push).
void finish_step(self_ptr self) {
  auto& st = self->state;
  SATRAP_ASSERT(
    st.loop.next_compute < st.loop.next_fetch && st.loop.inputs.count(st.loop.next_compute) == 1,
    "step={} next_fetch={}", st.loop.next_compute, st.loop.next_fetch);
  if (auto err = optimizer_step(st)) {
    fail(self, "the optimizer step of step " + std::to_string(st.loop.next_compute), err);
    return;
  }
  auto step = st.loop.next_compute;
  bool in_rank_order = st.plan.staleness == 0 && st.config.rank > 0;
  if (in_rank_order && st.loop.prev_rank_applied < step) {
    SATRAP_ASSERT(!st.loop.held_push, "step={} held={}", step, st.loop.held_push->first);
    st.loop.held_push.emplace(step, std::move(st.loop.pending_grads));
  } else {
    push_grads(self, step, std::move(st.loop.pending_grads));
  }
  st.loop.inputs.erase(step);
  ++st.loop.next_compute;
  try_compute(self);
}

void on_peer_applied(self_ptr self, int64_t step, int32_t rank) {
  auto& st = self->state;
  if (rank == st.config.rank - 1) {
    // At staleness 0 rank - 1 reports its steps in order; above it, pushes of different
    // aggregators may complete out of order (and nothing is held).
    st.loop.prev_rank_applied = std::max(st.loop.prev_rank_applied, step);
    if (st.loop.held_push && st.loop.held_push->first == step) {
      auto grads = std::move(st.loop.held_push->second);
      st.loop.held_push.reset();
      push_grads(self, step, std::move(grads));
    }
  }
  on_applied(self, step);
}

void drain_inbox(self_ptr self) {
  auto& st = self->state;
  while (st.ar.ring && st.ar.ring->active() && !st.ar.inbox.empty()) {
    capnp_payload out;
    auto more = st.ar.ring->receive(st.ar.inbox.front(), out);
    st.ar.inbox.pop_front();
    if (!more) {
      fail(self, "all-reducing the gradients of step " + std::to_string(st.loop.next_compute),
           more.error());
      return;
    }
    auto next = st.peers[static_cast<size_t>((st.config.rank + 1) % st.config.world)];
    if (*more)
      self->send(next, chunk_atom::value, std::move(out));
    else
      finish_step(self);
  }
}

// PooledGradients of batch n, built in the payload's own buffer: the model writes the gradients
// straight into its Data blob (`values`), so there is no scratch vector and no flattening copy.
// The blob is not zeroed first: every dense_model writes all of pooled_grad (its contract, tested
// in layers_test with a NaN-filled buffer), and a failed step never sends the payload.
struct pooled_grads_builder {
  payload_builder mb;
  float* values = nullptr;
  pooled_grads_builder(const trainer_state& st, int64_t n, uint32_t size, size_t bytes)
      : mb(payload_builder::words_for(3, 1, {bytes}), bytes) {
    auto out = mb.initRoot<schema::PooledGradients>();
    out.setBatch(n);
    out.setSize(size);
    out.setSlots(static_cast<uint32_t>(st.config.model.slots));
    out.setDim(static_cast<uint32_t>(st.config.model.dim));
    values = reinterpret_cast<float*>(out.initValues(bytes).begin());
  }
};

namespace {

// Polls the device all-reduce again after comm_poll (once: a tick already scheduled suffices).
void schedule_tick(self_ptr self) {
  auto& st = self->state;
  if (st.ar.comm_polling)
    return;
  st.ar.comm_polling = true;
  self->delayed_send(self, st.config.comm_poll, tick_atom::value);
}

// What the device all-reduce sums in place: the GPU model's device gradients, or the host
// gradients of a CPU model (a fake communicator in a test).
float* comm_values(trainer_state& st) {
#ifdef SATRAP_HAVE_CUDA
  if (auto* gpu = dynamic_cast<cuda_dense_model*>(st.model.get()))
    return gpu->device_grads();
#endif
  return st.model->grads().data();
}

// GPU trainers: false (and a tick scheduled) while the communicator is still being joined.
bool comm_ready(self_ptr self) {
  auto& st = self->state;
  if (!st.ar.device_ar)
    return true;
  auto ready = st.ar.device_ar->ready();
  if (!ready) {
    fail(self,
         "joining the NCCL communicator of generation "
           + std::to_string(st.ar.device_ar->generation()),
         ready.error());
    return false;
  }
  if (!*ready)
    schedule_tick(self);
  return *ready;
}

// GPU trainers: the batches of steps [first, next_compute + 1] that are here are staged (their
// copies into pinned memory and uploads on the model's copy stream enqueued, never waited for),
// in step order, so that the next step's upload overlaps this step's compute. Called whenever the
// trainer could compute or a batch arrives; staged steps below `first` are dropped. Only a batch
// the protocol already has is staged (at staleness 0 the next one is never fetched before this
// one is applied, so there is nothing to overlap). False when it failed the trainer.
bool stage_ready(self_ptr self, int64_t first) {
#ifdef SATRAP_HAVE_CUDA
  auto& st = self->state;
  auto* gpu = cuda_model(st);
  if (gpu == nullptr)
    return true;
  gpu->drop_staged_before(first);
  for (int64_t step = first; step <= st.loop.next_compute + 1 && step < st.plan.steps; ++step) {
    auto it = st.loop.inputs.find(step);
    if (it == st.loop.inputs.end() || !it->second.ready() || gpu->staged(step))
      continue;
    auto n = global_batch(st, step);
    auto in = decode_inputs(st, it->second, n, split_code(data_split::train));
    if (!in) {
      fail(self, "reading batch " + std::to_string(n), in.error());
      return false;
    }
    auto staged = gpu->stage_batch(step, static_cast<int>(in->dense.size), in->dense.dense.data(),
                                   in->pooled.values.data(), in->dense.labels.data());
    if (!staged) {
      fail(self, "uploading batch " + std::to_string(n),
           make_error(errc::peer_failure, staged.error()));
      return false;
    }
    if (!staged.value())
      break;  // both slots busy
    spdlog::trace("trainer_staged rank={} step={} batch={}", st.config.rank, step, n);
  }
#else
  (void)self;
  (void)first;
#endif
  return true;
}

// forward_backward of step next_compute: through the staged (overlapped) path when its batch is
// staged on a GPU model, else the model's own synchronous path. An error of the staged path
// fails the trainer (nullopt).
std::optional<double> step_forward_backward(self_ptr self, const batch_views& in, int size,
                                            float scale, float* pooled_grad) {
  auto& st = self->state;
#ifdef SATRAP_HAVE_CUDA
  if (auto* gpu = cuda_model(st); gpu != nullptr && gpu->staged(st.loop.next_compute)) {
    auto loss =
      gpu->forward_backward_staged(st.loop.next_compute, scale, st.loop.logits.data(), pooled_grad);
    if (!loss) {
      fail(self, "computing step " + std::to_string(st.loop.next_compute),
           make_error(errc::peer_failure, loss.error()));
      return std::nullopt;
    }
    return loss.value();
  }
#endif
  return st.model->forward_backward(size, in.dense.dense.data(), in.pooled.values.data(),
                                    in.dense.labels.data(), scale, st.loop.logits.data(),
                                    pooled_grad);
}

}  // namespace

void drop_staged(trainer_state& st) {
#ifdef SATRAP_HAVE_CUDA
  if (auto* gpu = cuda_model(st))
    gpu->drop_staged();
#else
  (void)st;
#endif
}

void comm_open(self_ptr self) {
  auto& st = self->state;
  if (!st.ar.device_ar || st.config.rank != 0)
    return;
  auto id = st.ar.device_ar->open(st.plan.generation);
  if (!id) {
    fail(self, "making the NCCL communicator of generation " + std::to_string(st.plan.generation),
         id.error());
    return;
  }
  spdlog::info("trainer_comm_open rank=0 world={} generation={}", st.config.world,
               st.plan.generation);
  for (int32_t r = 1; r < st.config.world; ++r)
    self->send(st.peers[static_cast<size_t>(r)], comm_id_atom::value, st.plan.generation, *id);
}

void on_comm_id(self_ptr self, uint64_t generation, const std::string& id) {
  auto& st = self->state;
  if (!st.ar.device_ar) {
    fail(self, "a communicator id arrived",
         make_error(errc::invalid_payload, "this trainer does not all-reduce on a device"));
    return;
  }
  auto joined = st.ar.device_ar->on_id(generation, id);
  if (!joined) {
    fail(self, "joining the NCCL communicator of generation " + std::to_string(generation),
         joined.error());
    return;
  }
  if (!*joined) {
    spdlog::warn("trainer_comm_id_stale rank={} generation={} current={}", st.config.rank,
                 generation, st.ar.device_ar->generation());
    return;
  }
  spdlog::info("trainer_comm_join rank={} world={} generation={}", st.config.rank, st.config.world,
               generation);
  try_compute(self);
}

void on_comm_tick(self_ptr self) {
  auto& st = self->state;
  st.ar.comm_polling = false;
  if (st.failed || !st.ar.device_ar)
    return;
  if (!st.ar.device_ar->active()) {
    try_compute(self);
    return;
  }
  auto done = st.ar.device_ar->done();
  if (!done) {
    fail(self, "all-reducing the gradients of step " + std::to_string(st.loop.next_compute),
         done.error());
    return;
  }
  if (*done)
    finish_step(self);
  else
    schedule_tick(self);
}

void try_compute(self_ptr self) {
  auto& st = self->state;
  if (st.failed || st.loop.next_compute >= st.plan.steps)
    return;
  if ((st.ar.ring && st.ar.ring->active()) || (st.ar.device_ar && st.ar.device_ar->active())) {
    stage_ready(self, st.loop.next_compute + 1);  // this step is computed; its all-reduce runs
    return;
  }
  if (!stage_ready(self, st.loop.next_compute))
    return;
  auto it = st.loop.inputs.find(st.loop.next_compute);
  if (it == st.loop.inputs.end() || !it->second.ready() || !comm_ready(self))
    return;
  auto n = global_batch(st, st.loop.next_compute);
  auto in = decode_inputs(st, it->second, n, split_code(data_split::train));
  if (!in) {
    fail(self, "reading batch " + std::to_string(n), in.error());
    return;
  }
  auto size = static_cast<int>(in->dense.size);
  auto labels = in->dense.labels;
  const int tasks = st.config.model.tasks;
  st.loop.logits.resize(static_cast<size_t>(size) * tasks);
  pooled_grads_builder grads(
    st, n, static_cast<uint32_t>(size),
    static_cast<size_t>(size) * st.config.model.slots * st.config.model.dim * sizeof(float));
  auto scale = 1.0f / static_cast<float>(size * st.config.world);
  auto computed = step_forward_backward(self, *in, size, scale, grads.values);
  if (!computed)
    return;
  double loss = *computed;
  st.report.step_losses.push_back(loss);
  st.report.samples += size;
  if (tasks == 1) {
    st.auc->add(st.loop.logits, labels);
  } else {  // the progress line's running AUC is the first task's
    auto z = task_column(st.loop.logits, tasks, 0);
    auto y = task_column(labels, tasks, 0);
    st.auc->add(z, y);
  }
  st.loop.pending_grads = grads.mb.finish();
  report_progress(st, size, loss, st.loop.next_compute + 1 == st.plan.steps);
  if (st.config.world == 1) {
    finish_step(self);
    return;
  }
  if (st.ar.device_ar) {
    float* values = comm_values(st);
    if (values == nullptr) {
      fail(self, "all-reducing the gradients of step " + std::to_string(st.loop.next_compute),
           make_error(errc::invalid_config, "the device gradients are unavailable"));
      return;
    }
    if (auto err = st.ar.device_ar->start(values, st.param_count)) {
      fail(self, "all-reducing the gradients of step " + std::to_string(st.loop.next_compute), err);
      return;
    }
    schedule_tick(self);
    return;
  }
  auto next = st.peers[static_cast<size_t>((st.config.rank + 1) % st.config.world)];
  self->send(next, chunk_atom::value, st.ar.ring->start(st.loop.next_compute, st.model->grads()));
  drain_inbox(self);
}

}  // namespace satrap::trainer_detail
