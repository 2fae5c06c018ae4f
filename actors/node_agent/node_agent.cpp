#include "actors/node_agent/node_agent.hpp"

#include "actors/job_data_opener.hpp"
#include "actors/node_agent/role_configs.hpp"
#include "actors/peer_guard.hpp"
#include "runtime/log.hpp"
#include "runtime/peer_identity.hpp"
#include "runtime/error.hpp"
#include "runtime/broker_buffers.hpp"
#include "runtime/memory_release.hpp"

#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <map>

namespace satrap {

namespace {

// The jobs this node has seen lately, newest last: each one's spec parsed once, and its data
// (loaders only) opened once. Older jobs are forgotten (node_agent_config::jobs_kept): their data
// stays mapped only as long as an actor of theirs still holds it.
struct job_entry {
  std::string yaml;
  job_spec spec;
  opened_job_data data;  // null until opened
};

// A loader spawn waiting for its job's data to open.
struct waiting_loader {
  caf::typed_response_promise<data_loader_actor> promise;
  int32_t index;
  std::vector<gradient_aggregator_actor> aggregators;
};

struct agent_state {
  node_agent_config config;
  std::deque<job_entry> jobs;
  std::map<std::string, std::vector<waiting_loader>> opening;  // by job YAML
  caf::node_id head;  // the head's process (none: only local requests)
  int64_t refused = 0;
  int64_t job_actors = 0;  // spawned here and not stopped yet (monitored)
  static inline const char* name = "node_agent";
};

// Stateful, and deaf to exit messages from other processes (actors/peer_guard.hpp).
using self_ptr = exit_guard<caf::stateful_actor<agent_state, node_agent_actor::base>>*;

// Spawn requests come from this process (embedded jobs) or from the head's; anyone else who
// reached the published port is refused.
caf::error check_sender(self_ptr self) {
  if (sender_is_local(self))
    return caf::none;
  auto from = sender_node(self);
  // With TLS the head's process must also hold the head's certificate
  // (runtime/peer_identity.hpp).
  if (self->state.head != caf::node_id{} && from == self->state.head && peer_holds(from, "head"))
    return caf::none;
  ++self->state.refused;
  static log_rate rate{10};
  uint64_t unlogged = 0;
  if (rate.allow(unlogged))
    spdlog::warn("request_refused what=spawn node={} peer={} refused_total={} unlogged_before={}",
                 self->state.config.node, peer_text(self), self->state.refused, unlogged);
  return make_error(errc::unauthorized, "this node agent takes requests only from its head");
}

job_entry* find_entry(agent_state& st, const std::string& yaml) {
  for (auto& e : st.jobs)
    if (e.yaml == yaml)
      return &e;
  return nullptr;
}

caf::expected<job_entry*> entry_of(agent_state& st, const std::string& yaml) {
  if (auto* e = find_entry(st, yaml))
    return e;
  auto spec = job_spec_from_wire(yaml, "job");
  if (!spec)
    return spec.error();
  st.jobs.push_back({yaml, std::move(*spec), nullptr});
  while (st.jobs.size() > std::max<size_t>(1, st.config.jobs_kept))
    st.jobs.pop_front();
  return &st.jobs.back();
}

caf::expected<const job_spec*> spec_of(agent_state& st, const std::string& yaml) {
  auto e = entry_of(st, yaml);
  if (!e)
    return e.error();
  return &(*e)->spec;
}

template <class Handle>
void log_spawn(self_ptr self, const Handle& h, const char* role, int32_t index) {
  spdlog::debug("actor_spawned node={} role={} index={}", self->state.config.node, role, index);
  self->monitor(h);  // its down message counts it out (memory_release when none is left)
  ++self->state.job_actors;
  if (self->state.config.on_spawn)
    self->state.config.on_spawn(caf::actor_cast<caf::actor>(h), role, index);
}

caf::expected<data_loader_actor> spawn_loader(self_ptr self, const job_spec& spec,
                                              const opened_job_data& d, int32_t index,
                                              std::vector<gradient_aggregator_actor> aggs) {
  if (!*d)
    return d->error();
  data_loader_config c{index,     (*d)->source,          spec.training.batch_size, std::move(aggs),
                       spec.name, spec.metrics.group_by, spec.placement.loaders};
  auto h = spawn_data_loader(self->system(), c);
  log_spawn(self, h, "data_loader", index);
  return h;
}

}  // namespace

node_agent_actor spawn_node_agent(caf::actor_system& sys, const node_agent_config& config) {
  return sys.spawn([config](self_ptr self) -> node_agent_actor::behavior_type {
    self->state.config = config;
    // A job's actors are gone from this node: give the memory they freed back to the system
    // (runtime/memory_release.hpp), or the node's resident size creeps up job after job.
    self->set_down_handler([self](const caf::down_msg&) {
      if (--self->state.job_actors > 0)
        return;
      if (self->state.head != caf::node_id{})  // a cluster node: its broker's spare buffer too
        broker_buffers_release(self->system(), "job_actors_stopped");
      else
        memory_release("job_actors_stopped");
    });
    return {
      [self](spawn_atom, shard_atom, const std::string& yaml,
             int32_t index) -> caf::result<embedding_shard_actor> {
        if (auto err = check_sender(self))
          return err;
        auto spec = spec_of(self->state, yaml);
        if (!spec)
          return spec.error();
        auto c = shard_config(**spec, index);
        c.audit = self->state.config.audit;
        c.environment = self->state.config.environment;
        auto h = spawn_embedding_shard(self->system(), c);
        log_spawn(self, h, "embedding_shard", index);
        return h;
      },
      [self](spawn_atom, aggregator_atom, const std::string& yaml, int32_t index,
             std::vector<embedding_shard_actor>& shards) -> caf::result<gradient_aggregator_actor> {
        if (auto err = check_sender(self))
          return err;
        auto spec = spec_of(self->state, yaml);
        if (!spec)
          return spec.error();
        auto h = spawn_gradient_aggregator(self->system(),
                                           aggregator_config(**spec, index, std::move(shards)));
        log_spawn(self, h, "gradient_aggregator", index);
        return h;
      },
      [self](spawn_atom, loader_atom, const std::string& yaml, int32_t index,
             std::vector<gradient_aggregator_actor>& aggs) -> caf::result<data_loader_actor> {
        if (auto err = check_sender(self))
          return err;
        auto& st = self->state;
        auto e = entry_of(st, yaml);
        if (!e)
          return e.error();
        if ((*e)->data)
          return spawn_loader(self, (*e)->spec, (*e)->data, index, std::move(aggs));
        auto promise = self->make_response_promise<data_loader_actor>();
        auto& waiting = st.opening[yaml];
        waiting.push_back({promise, index, std::move(aggs)});
        if (waiting.size() == 1)  // the first asks: open the data once, off the worker threads
          open_job_data(self, (*e)->spec, [self, yaml, spec = (*e)->spec](opened_job_data d) {
            auto& st = self->state;
            if (auto* entry = find_entry(st, yaml))
              entry->data = d;
            auto waiting = std::move(st.opening[yaml]);
            st.opening.erase(yaml);
            for (auto& w : waiting) {
              auto r = spawn_loader(self, spec, d, w.index, std::move(w.aggregators));
              if (r)
                w.promise.deliver(std::move(*r));
              else
                w.promise.deliver(r.error());
            }
          });
        return promise;
      },
      [self](spawn_atom, trainer_atom, const std::string& yaml, int32_t rank,
             std::vector<data_loader_actor>& loaders, std::vector<gradient_aggregator_actor>& aggs,
             progress_sink_actor& sink) -> caf::result<dense_trainer_actor> {
        if (auto err = check_sender(self))
          return err;
        auto spec = spec_of(self->state, yaml);
        if (!spec)
          return spec.error();
        auto h = spawn_dense_trainer(
          self->system(),
          trainer_config(**spec, rank, std::move(loaders), std::move(aggs), std::move(sink),
                         static_cast<int>(self->system().scheduler().num_workers())));
        if (!h)
          return h.error();
        log_spawn(self, *h, "dense_trainer", rank);
        return *h;
      },
      [self](head_atom, const caf::node_id& head) {
        if (!sender_is_local(self)) {
          check_sender(self);  // counted and logged as refused
          return;
        }
        self->state.head = head;
        spdlog::info("node_head_set node={} head={}", self->state.config.node, to_string(head));
      },
    };
  });
}

}  // namespace satrap
