#include "actors/gradient_aggregator/gradient_aggregator.hpp"

#include "runtime/actor_meter.hpp"
#include "runtime/batch_key.hpp"
#include "runtime/error.hpp"
#include "runtime/payload_checks.hpp"
#include "runtime/request_watch.hpp"
#include "models/assert.hpp"
#include "satrap_schemas/step.capnp.h"

#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include <optional>
#include <unordered_map>

namespace satrap {

namespace {

// A batch between its ids arriving and its gradients being pushed to the shards.
struct batch_state {
  int64_t batch = 0;
  int8_t split = 0;
  uint32_t size = 0;
  uint32_t slots = 0;
  bool have_ids = false;
  std::vector<uint32_t> offsets;
  std::vector<float> weights;  // empty: every id weighs 1
  dedup_result dedup;
  std::vector<std::vector<uint32_t>> by_shard;  // shard -> positions in dedup.unique
  // Unique id i's row: a pointer into the shard reply that brought it (kept in `replies` until
  // the batch is pooled), so rows are read where they arrived instead of copied together first.
  std::vector<const float*> row_of;
  std::vector<capnp_payload> replies;
  size_t lookups_left = 0;
  std::optional<capnp_payload> pooled;                                // ready, not yet asked for
  std::optional<caf::typed_response_promise<capnp_payload>> waiting;  // asked for, not ready
  caf::error failure;
};

struct aggregator_state {
  gradient_aggregator_config config;
  std::unordered_map<int64_t, batch_state> batches;
  // A loader sent an id batch that did not decode: its batch number is unknown, so every
  // pooled request from then on is answered with this error (the job fails and says why).
  caf::error bad_ids;
  meter_handle meter;   // for the status endpoint
  request_watch watch;  // deadlines of the requests to the shards
  static inline const char* name = "gradient_aggregator";
};

// Its own timer message, which no other actor sends: not on the public handle.
using gradient_aggregator_impl = gradient_aggregator_actor::extend<
  caf::reacts_to<watch_atom>>;  // the shard requests' deadlines (request_watch.hpp)

using self_ptr = gradient_aggregator_impl::stateful_pointer<aggregator_state>;

void deliver_pooled(aggregator_state& st, int64_t key) {
  auto& b = st.batches[key];
  if (st.bad_ids && !b.failure && !b.pooled)
    b.failure = st.bad_ids;
  if (!b.waiting || (!b.pooled && !b.failure))
    return;
  if (b.failure)
    b.waiting->deliver(b.failure);
  else
    b.waiting->deliver(std::move(*b.pooled));
  if (b.split != 0 || b.failure)
    st.batches.erase(key);  // test batches get no gradients; failed ones are reported once
  else {
    b.waiting.reset();
    b.pooled.reset();
  }
}

// Each slot's pooling (one entry: every slot's).
std::span<const pooling> slot_pooling(const gradient_aggregator_config& c) {
  if (c.slot_pool.empty())
    return {&c.pool, 1};
  return c.slot_pool;
}

void pool_batch(aggregator_state& st, batch_state& b) {
  auto dim = static_cast<uint32_t>(st.config.dim);
  SATRAP_ASSERT(b.have_ids && b.lookups_left == 0 && !b.pooled
                  && b.offsets.size() == size_t{b.size} * b.slots + 1
                  && b.row_of.size() == b.dedup.unique.size(),
                "batch={} left={} offsets={} rows={}", b.batch, b.lookups_left, b.offsets.size(),
                b.row_of.size());
  // Pooled straight into the payload's buffer (payload_builder): no flattening copy, and the
  // values (every one written by pool_forward) are not zeroed first.
  const size_t bytes = size_t{b.size} * b.slots * dim * sizeof(float);
  payload_builder mb(payload_builder::words_for(3, 1, {bytes}), bytes);
  auto out = mb.initRoot<schema::PooledEmbeddings>();
  out.setBatch(b.batch);
  out.setSize(b.size);
  out.setSlots(b.slots);
  out.setDim(dim);
  auto values = out.initValues(bytes);
  auto* pooled = reinterpret_cast<float*>(values.begin());
  if (st.config.slot_pool.empty() && b.weights.empty())
    pool_forward_rows(st.config.pool, st.config.dim, b.offsets, b.dedup.inverse, b.row_of, pooled);
  else
    pool_forward_rows_slots(slot_pooling(st.config), b.weights, st.config.dim, b.offsets,
                            b.dedup.inverse, b.row_of, pooled);
  b.pooled = mb.finish();
  b.row_of = {};  // rows are not needed for the backward pass
  b.replies = {};
}

capnp_payload make_lookup(int64_t batch, bool read_only, const std::vector<uint64_t>& unique,
                          const std::vector<uint32_t>& positions) {
  const size_t bytes = positions.size() * sizeof(uint64_t);
  payload_builder mb(payload_builder::words_for(2, 1, {bytes}), bytes);  // ids written in full
  auto req = mb.initRoot<schema::LookupRequest>();
  req.setBatch(batch);
  req.setReadOnly(read_only);
  auto ids = req.initIds(bytes);
  auto* dst = reinterpret_cast<uint64_t*>(ids.begin());
  for (size_t i = 0; i < positions.size(); ++i)
    dst[i] = unique[positions[i]];
  return mb.finish();
}

void on_rows(self_ptr self, int64_t key, uint32_t shard, capnp_payload& rows) {
  auto& st = self->state;
  auto it = st.batches.find(key);
  if (it == st.batches.end())
    return;
  auto& b = it->second;
  SATRAP_ASSERT(shard < b.by_shard.size() && b.lookups_left > 0, "shard={} shards={} left={}",
                shard, b.by_shard.size(), b.lookups_left);
  const auto& pos = b.by_shard[shard];
  auto dim = static_cast<size_t>(st.config.dim);
  auto in = decode_embedding_rows(rows, b.batch, static_cast<uint32_t>(dim), pos.size());
  if (!in) {
    spdlog::error("aggregator_bad_rows aggregator={} shard={} batch={} error=\"{}\"",
                  st.config.index, shard, b.batch, error_text(in.error()));
    if (!b.failure)
      b.failure =
        make_error(errc::invalid_payload, "embedding rows from shard " + std::to_string(shard)
                                            + ": " + error_text(in.error()));
    --b.lookups_left;
    deliver_pooled(st, key);
    return;
  }
  for (size_t i = 0; i < pos.size(); ++i)
    b.row_of[pos[i]] = in->rows.data() + i * dim;
  // Moving the payload keeps its buffer, so the pointers above stay valid.
  b.replies.push_back(std::move(rows));
  if (--b.lookups_left == 0 && !b.failure) {
    pool_batch(st, b);
    deliver_pooled(st, key);
  }
}

void on_ids(self_ptr self, const capnp_payload& msg) {
  auto& st = self->state;
  auto in = decode_id_batch(msg, 0);
  if (!in) {
    spdlog::error("aggregator_bad_ids aggregator={} error=\"{}\"", st.config.index,
                  error_text(in.error()));
    if (!st.bad_ids)
      st.bad_ids = make_error(errc::invalid_payload, "aggregator " + std::to_string(st.config.index)
                                                       + ": " + error_text(in.error()));
    std::vector<int64_t> waiting;
    for (auto& [key, b] : st.batches)
      if (b.waiting)
        waiting.push_back(key);
    for (auto key : waiting)
      deliver_pooled(st, key);
    return;
  }
  if (!st.config.slot_pool.empty() && in->slots != st.config.slot_pool.size()) {
    spdlog::error("aggregator_bad_ids aggregator={} batch={} slots={} expected={}", st.config.index,
                  in->batch, in->slots, st.config.slot_pool.size());
    auto key = batch_key(in->batch, in->split);
    auto& b = st.batches[key];
    b.batch = in->batch;
    b.split = in->split;
    b.failure = make_error(errc::invalid_payload, "id batch " + std::to_string(in->batch) + ": "
                                                    + std::to_string(in->slots)
                                                    + " slots, the job's features have "
                                                    + std::to_string(st.config.slot_pool.size()));
    deliver_pooled(st, key);
    return;
  }
  auto key = batch_key(in->batch, in->split);
  auto& b = st.batches[key];
  b.batch = in->batch;
  b.split = in->split;
  b.size = in->size;
  b.slots = in->slots;
  b.have_ids = true;
  b.offsets.assign(in->offsets.begin(), in->offsets.end());
  b.weights.assign(in->weights.begin(), in->weights.end());
  b.dedup = dedup_ids(in->ids);
  auto shards = st.config.shards.size();
  b.by_shard.assign(shards, {});
  for (uint32_t i = 0; i < b.dedup.unique.size(); ++i)
    b.by_shard[st.config.partitions.shard_of(b.dedup.unique[i])].push_back(i);
  b.row_of.assign(b.dedup.unique.size(), nullptr);
  b.replies.clear();
  b.replies.reserve(shards);
  b.lookups_left = 0;
  for (uint32_t s = 0; s < shards; ++s) {
    if (b.by_shard[s].empty())
      continue;
    ++b.lookups_left;
    auto on_error = [self, key, s](const caf::error& e) {
      auto& st = self->state;
      auto it = st.batches.find(key);
      if (it == st.batches.end())
        return;
      spdlog::error("aggregator_lookup_failed aggregator={} shard={} error={}", st.config.index, s,
                    error_text(e));
      it->second.failure =
        make_error(errc::peer_failure,
                   "embedding lookup on shard " + std::to_string(s) + " failed: " + error_text(e));
      deliver_pooled(st, key);
    };
    watched_request<capnp_payload>(
      self, st.watch, st.config.shards[s], st.config.timeout,
      [self, key, s](capnp_payload& rows) { on_rows(self, key, s, rows); }, on_error,
      lookup_atom::value, make_lookup(b.batch, b.split != 0, b.dedup.unique, b.by_shard[s]));
  }
  if (b.lookups_left == 0) {
    pool_batch(st, b);
    deliver_pooled(st, key);
  }
}

caf::typed_response_promise<capnp_payload> on_pooled(self_ptr self, int64_t batch, int8_t split) {
  auto& st = self->state;
  auto key = batch_key(batch, split);
  auto& b = st.batches[key];
  b.batch = batch;
  b.split = split;
  b.waiting = self->make_response_promise<capnp_payload>();
  auto promise = *b.waiting;
  deliver_pooled(st, key);
  return promise;
}

// Everything one batch's gradient push needs once its batch_state is gone.
struct push_state {
  caf::typed_response_promise<int64_t> promise;
  size_t left = 0;
  int64_t rows = 0;
  bool failed = false;
};

capnp_payload make_update(int64_t batch, uint32_t dim, const batch_state& b,
                          const std::vector<uint32_t>& positions, const float* grad_unique) {
  const size_t id_bytes = positions.size() * sizeof(uint64_t);
  const size_t grad_bytes = positions.size() * dim * sizeof(float);
  // Built in the payload's buffer; the gradients (the last blob) are written in full.
  payload_builder mb(payload_builder::words_for(2, 2, {id_bytes, grad_bytes}), grad_bytes);
  auto req = mb.initRoot<schema::EmbeddingGradients>();
  req.setBatch(batch);
  req.setDim(dim);
  auto ids = reinterpret_cast<uint64_t*>(req.initIds(id_bytes).begin());
  auto grads = reinterpret_cast<float*>(req.initGrads(grad_bytes).begin());
  for (size_t i = 0; i < positions.size(); ++i) {
    ids[i] = b.dedup.unique[positions[i]];
    std::copy_n(grad_unique + size_t{positions[i]} * dim, dim, grads + i * dim);
  }
  return mb.finish();
}

caf::typed_response_promise<int64_t> on_grads(self_ptr self, const capnp_payload& msg) {
  auto& st = self->state;
  auto promise = self->make_response_promise<int64_t>();
  auto in = decode_pooled_gradients(msg);
  if (!in) {
    promise.deliver(in.error());
    return promise;
  }
  auto key = batch_key(in->batch, 0);
  auto it = st.batches.find(key);
  if (it == st.batches.end() || !it->second.have_ids) {
    promise.deliver(make_error(errc::invalid_payload,
                               "gradients for unknown batch " + std::to_string(in->batch)));
    return promise;
  }
  auto dim = static_cast<uint32_t>(st.config.dim);
  if (auto err = pooled_check_shape(*in, {in->batch, it->second.size, it->second.slots, dim},
                                    "pooled gradients")) {
    promise.deliver(err);  // the batch stays: a correct push may still come
    return promise;
  }
  auto b = std::move(it->second);
  st.batches.erase(it);
  SATRAP_ASSERT(
    b.offsets.size() == size_t{b.size} * b.slots + 1 && b.offsets.back() == b.dedup.inverse.size(),
    "batch={} offsets={} size={} slots={}", b.batch, b.offsets.size(), b.size, b.slots);
  std::vector<float> grad_unique(b.dedup.unique.size() * dim, 0.0f);
  if (st.config.slot_pool.empty() && b.weights.empty())
    pool_backward(st.config.pool, st.config.dim, b.offsets, b.dedup.inverse, in->values.data(),
                  grad_unique.data());
  else
    pool_backward_slots(slot_pooling(st.config), b.weights, st.config.dim, b.offsets,
                        b.dedup.inverse, in->values.data(), grad_unique.data());
  auto push = std::make_shared<push_state>();
  push->promise = promise;
  for (uint32_t s = 0; s < b.by_shard.size(); ++s)
    push->left += b.by_shard[s].empty() ? 0 : 1;
  if (push->left == 0)
    promise.deliver(int64_t{0});
  for (uint32_t s = 0; s < b.by_shard.size(); ++s) {
    if (b.by_shard[s].empty())
      continue;
    auto on_error = [self, push, s, batch = b.batch](const caf::error& e) {
      spdlog::error("aggregator_update_failed aggregator={} shard={} batch={} error={}",
                    self->state.config.index, s, batch, error_text(e));
      if (!push->failed)
        push->promise.deliver(make_error(
          errc::peer_failure, "gradient push to shard " + std::to_string(s) + " failed for batch "
                                + std::to_string(batch) + ": " + error_text(e)));
      push->failed = true;
    };
    watched_request<int64_t>(
      self, st.watch, st.config.shards[s], st.config.timeout,
      [push](int64_t rows) {
        push->rows += rows;
        if (--push->left == 0 && !push->failed)
          push->promise.deliver(push->rows);
      },
      on_error, update_atom::value,
      make_update(b.batch, dim, b, b.by_shard[s], grad_unique.data()));
  }
  return promise;
}

gradient_aggregator_impl::behavior_type aggregator_behavior(self_ptr self,
                                                            gradient_aggregator_config config) {
  // An exception fails the actor with its message (and bad_alloc as no_resource), not CAF's
  // bare "runtime_error": the supervisor's record and its restart decision see the cause.
  self->set_exception_handler([](caf::scheduled_actor*, std::exception_ptr& e) {
    return exception_error(e, "gradient aggregator");
  });
  self->state.config = std::move(config);
  self->state.meter =
    meter_handle("gradient_aggregator", self->state.config.index, self->state.config.job);
  return {
    [self](ids_atom, const capnp_payload& msg) {
      self->state.meter.on_message(self);
      on_ids(self, msg);
    },
    [self](pooled_atom, int64_t batch, int8_t split) {
      self->state.meter.on_message(self);
      return on_pooled(self, batch, split);
    },
    [self](grads_atom, const capnp_payload& msg) {
      self->state.meter.on_message(self);
      return on_grads(self, msg);
    },
    [self](watch_atom) { watch_tick(self, self->state.watch, self->state.config.timeout); },
  };
}

}  // namespace

gradient_aggregator_actor spawn_gradient_aggregator(caf::actor_system& sys,
                                                    const gradient_aggregator_config& config) {
  // The public handle: without its own timer message.
  return caf::actor_cast<gradient_aggregator_actor>(sys.spawn(aggregator_behavior, config));
}

}  // namespace satrap
