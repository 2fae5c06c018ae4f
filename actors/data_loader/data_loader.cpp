#include "actors/data_loader/data_loader.hpp"

#include "runtime/actor_meter.hpp"

#include "runtime/batch_key.hpp"
#include "runtime/error.hpp"
#include "satrap_schemas/step.capnp.h"

#include <caf/typed_event_based_actor.hpp>

namespace satrap {

namespace {

struct loader_state {
  data_loader_config config;
  static inline const char* name = "data_loader";
  meter_handle meter;  // for the status endpoint
};

schema::Split schema_split(int8_t split) {
  return split == 0 ? schema::Split::TRAIN : split == 1 ? schema::Split::TEST : schema::Split::VALIDATION;
}

capnp_payload make_id_batch(const batch& b, int8_t split) {
  capnp::MallocMessageBuilder mb;
  auto out = mb.initRoot<schema::IdBatch>();
  out.setBatch(b.index);
  out.setSplit(schema_split(split));
  out.setSize(static_cast<uint32_t>(b.size));
  out.setSlots(static_cast<uint32_t>(b.slots));
  out.setOffsets(data_of(b.offsets));
  out.setIds(data_of(b.ids));
  return payload_encode(mb);
}

// Per sample, the first id of slot `group_by` (no id: all ones), for grouped AUC.
std::vector<uint64_t> group_ids(const batch& b, int32_t group_by) {
  std::vector<uint64_t> g(static_cast<size_t>(b.size), ~uint64_t{0});
  for (int i = 0; i < b.size; ++i) {
    auto bag = static_cast<size_t>(i) * static_cast<size_t>(b.slots) + static_cast<size_t>(group_by);
    if (b.offsets[bag] < b.offsets[bag + 1])
      g[static_cast<size_t>(i)] = b.ids[b.offsets[bag]];
  }
  return g;
}

capnp_payload make_dense_batch(const batch& b, int8_t split, int32_t group_by) {
  capnp::MallocMessageBuilder mb;
  auto out = mb.initRoot<schema::DenseBatch>();
  out.setBatch(b.index);
  out.setSplit(schema_split(split));
  out.setSize(static_cast<uint32_t>(b.size));
  out.setDenseFeatures(static_cast<uint32_t>(b.dense_features));
  out.setDense(data_of(b.dense));
  out.setLabels(data_of(b.labels));
  out.setProbs(data_of(b.probs));
  if (split != 0 && group_by >= 0 && group_by < b.slots)
    out.setGroups(data_of(group_ids(b, group_by)));
  return payload_encode(mb);
}

data_loader_actor::behavior_type
loader_behavior(data_loader_actor::stateful_pointer<loader_state> self, data_loader_config config) {
  // An exception fails the actor with its message (and bad_alloc as no_resource), not CAF's
  // bare "runtime_error": the supervisor's record and its restart decision see the cause.
  self->set_exception_handler([](caf::scheduled_actor*, std::exception_ptr& e) {
    return exception_error(e, "data loader");
  });
  self->state.config = std::move(config);
  self->state.meter = meter_handle("data_loader", self->state.config.index, self->state.config.job);
  return {
    [self](fetch_atom, int64_t index, int8_t split) {
      auto& st = self->state;
      st.meter.on_message(self);
      auto b = st.config.data->make_batch(split_of(split), index, st.config.batch_size);
      auto& agg = st.config.aggregators[aggregator_for_batch(index, st.config.aggregators.size())];
      self->send(agg, ids_atom::value, make_id_batch(b, split));
      return make_dense_batch(b, split, st.config.group_by);
    },
  };
}

}  // namespace

data_loader_actor spawn_data_loader(caf::actor_system& sys, const data_loader_config& config) {
  return sys.spawn(loader_behavior, config);
}

}  // namespace satrap
