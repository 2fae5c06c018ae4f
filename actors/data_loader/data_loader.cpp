#include "actors/data_loader/data_loader.hpp"

#include "runtime/actor_meter.hpp"

#include "runtime/batch_key.hpp"
#include "runtime/error.hpp"
#include "satrap_schemas/step.capnp.h"

#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <cstring>
#include <map>

namespace satrap {

namespace {

// A batch made ahead of its fetch: both payloads, encoded.
struct made_batch {
  capnp_payload ids;
  capnp_payload dense;
};

struct loader_state {
  data_loader_config config;
  std::map<int64_t, made_batch> ahead;  // training batches made ahead, by number
  static inline const char* name = "data_loader";
  meter_handle meter;  // for the status endpoint
};

schema::Split schema_split(int8_t split) {
  return split == 0   ? schema::Split::TRAIN
         : split == 1 ? schema::Split::TEST
                      : schema::Split::VALIDATION;
}

// Copies xs into a Data blob of the message being built.
template <class T>
void put(capnp::Data::Builder out, const std::vector<T>& xs) {
  if (!xs.empty())
    std::memcpy(out.begin(), xs.data(), xs.size() * sizeof(T));
}

// Built in the payload's own buffer (payload_builder): no zeroed segment to copy into and no
// flattening copy; the ids, the last blob, are written in full.
capnp_payload make_id_batch(const batch& b, int8_t split) {
  const size_t offset_bytes = b.offsets.size() * sizeof(b.offsets[0]);
  const size_t id_bytes = b.ids.size() * sizeof(b.ids[0]);
  const size_t weight_bytes = b.weights.size() * sizeof(float);
  payload_builder mb(payload_builder::words_for(3, 3, {offset_bytes, id_bytes, weight_bytes}),
                     weight_bytes > 0 ? weight_bytes : id_bytes);
  auto out = mb.initRoot<schema::IdBatch>();
  out.setBatch(b.index);
  out.setSplit(schema_split(split));
  out.setSize(static_cast<uint32_t>(b.size));
  out.setSlots(static_cast<uint32_t>(b.slots));
  put(out.initOffsets(offset_bytes), b.offsets);
  put(out.initIds(id_bytes), b.ids);
  if (!b.weights.empty())  // (the last blob: written in full)
    put(out.initWeights(weight_bytes), b.weights);
  return mb.finish();
}

// Per sample, the first id of slot `group_by` (no id: all ones), for grouped AUC.
std::vector<uint64_t> group_ids(const batch& b, int32_t group_by) {
  std::vector<uint64_t> g(static_cast<size_t>(b.size), ~uint64_t{0});
  for (int i = 0; i < b.size; ++i) {
    auto bag =
      static_cast<size_t>(i) * static_cast<size_t>(b.slots) + static_cast<size_t>(group_by);
    if (b.offsets[bag] < b.offsets[bag + 1])
      g[static_cast<size_t>(i)] = b.ids[b.offsets[bag]];
  }
  return g;
}

capnp_payload make_dense_batch(const batch& b, int8_t split, int32_t group_by) {
  std::vector<uint64_t> groups;
  if (split != 0 && group_by >= 0 && group_by < b.slots)
    groups = group_ids(b, group_by);
  const size_t dense_bytes = b.dense.size() * sizeof(b.dense[0]);
  const size_t label_bytes = b.labels.size() * sizeof(b.labels[0]);
  const size_t prob_bytes = b.probs.size() * sizeof(b.probs[0]);
  const size_t group_bytes = groups.size() * sizeof(groups[0]);
  payload_builder mb(
    payload_builder::words_for(3, 4, {dense_bytes, label_bytes, prob_bytes, group_bytes}));
  auto out = mb.initRoot<schema::DenseBatch>();
  out.setBatch(b.index);
  out.setSplit(schema_split(split));
  out.setSize(static_cast<uint32_t>(b.size));
  out.setDenseFeatures(static_cast<uint32_t>(b.dense_features));
  put(out.initDense(dense_bytes), b.dense);
  put(out.initLabels(label_bytes), b.labels);
  put(out.initProbs(prob_bytes), b.probs);
  if (!groups.empty())
    put(out.initGroups(group_bytes), groups);
  return mb.finish();
}

made_batch make(const loader_state& st, int64_t index, int8_t split) {
  auto b = st.config.data->make_batch(split_of(split), index, st.config.batch_size);
  return {make_id_batch(b, split), make_dense_batch(b, split, st.config.group_by)};
}

data_loader_actor::behavior_type loader_behavior(
  data_loader_actor::stateful_pointer<loader_state> self, data_loader_config config) {
  // An exception fails the actor with its message (and bad_alloc as no_resource), not CAF's
  // bare "runtime_error": the supervisor's record and its restart decision see the cause.
  self->set_exception_handler(
    [](caf::scheduled_actor*, std::exception_ptr& e) { return exception_error(e, "data loader"); });
  self->state.config = std::move(config);
  self->state.meter = meter_handle("data_loader", self->state.config.index, self->state.config.job);
  return {
    [self](fetch_atom, int64_t index, int8_t split) -> caf::result<capnp_payload> {
      auto& st = self->state;
      st.meter.on_message(self);
      auto& agg = st.config.aggregators[aggregator_for_batch(index, st.config.aggregators.size())];
      made_batch m;
      if (auto it = st.ahead.find(index); split == 0 && it != st.ahead.end()) {
        m = std::move(it->second);
        st.ahead.erase(it);
      } else {
        m = make(st, index, split);
      }
      self->send(agg, ids_atom::value, std::move(m.ids));
      if (split != 0 || st.config.read_ahead <= 0)
        return std::move(m.dense);
      // Answer first, then make what comes next while the trainer works on this one.
      auto promise = self->make_response_promise<capnp_payload>();
      promise.deliver(std::move(m.dense));
      st.ahead.erase(st.ahead.begin(), st.ahead.lower_bound(index));  // passed: never fetched now
      const int64_t stride = std::max(1, st.config.loaders);
      for (int32_t k = 1; k <= st.config.read_ahead; ++k)
        if (auto next = index + k * stride; st.ahead.count(next) == 0)
          st.ahead.emplace(next, make(st, next, 0));
      return promise;
    },
  };
}

}  // namespace

data_loader_actor spawn_data_loader(caf::actor_system& sys, const data_loader_config& config) {
  return sys.spawn(loader_behavior, config);
}

}  // namespace satrap
