#include "actors/job_supervisor/supervisor_state.hpp"

#include "runtime/error.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace satrap::supervisor {

void stop_job(self_ptr self, caf::exit_reason reason) {
  auto& st = self->state;
  ++st.generation;  // from here on, every reply and exit is stale
  for (auto& [addr, node] : st.children)
    if (auto a = caf::actor_cast<caf::actor>(addr))
      self->send_exit(a, reason);
  st.children.clear();
  if (st.config.own_nodes)
    for (auto& n : st.config.nodes)
      self->send_exit(n, reason);
  self->quit(reason);
}

void fail_job(self_ptr self, const caf::error& e) {
  auto& st = self->state;
  spdlog::error("job_failed error=\"{}\"", error_text(e));
  for (auto& p : st.on_demand)
    p.deliver(e);
  st.on_demand.clear();
  if (st.done && st.done->pending())
    st.done->deliver(e);
  stop_job(self, caf::exit_reason::kill);
}

// Picks the nodes for the next generation: those the directory reports alive, less those whose
// actors this supervisor saw become unreachable; then plans the job on them.
void replan(self_ptr self, std::function<void()> next) {
  auto& st = self->state;
  if (!st.config.directory) {  // embedded: the one local agent
    next();
    return;
  }
  auto gen = st.generation;
  self
    ->request(st.config.directory, ms(st.config.spec.timing.directory_timeout_ms),
              nodes_atom::value)
    .then(
      [self, gen, next](std::vector<std::string>& names, std::vector<node_agent_actor>& agents) {
        auto& st = self->state;
        if (gen != st.generation)
          return;
        manifest alive = st.config.cluster;
        alive.nodes.clear();
        std::vector<node_agent_actor> nodes;
        std::vector<std::string> node_names;
        for (auto& n : st.config.cluster.nodes) {
          auto it = std::find(names.begin(), names.end(), n.name);
          if (it == names.end())
            continue;
          auto& agent = agents[static_cast<size_t>(it - names.begin())];
          if (st.rec.is_lost(n.name)) {
            // Lost under this job: only a new process of that node (a new agent) may serve again.
            auto old = std::find(st.config.node_names.begin(), st.config.node_names.end(), n.name);
            if (old != st.config.node_names.end()
                && st.config.nodes[static_cast<size_t>(old - st.config.node_names.begin())]
                     == agent)
              continue;
            st.rec.node_back(n.name);
          }
          alive.nodes.push_back(n);
          nodes.push_back(agent);
          node_names.push_back(n.name);
        }
        auto plan =
          alive.nodes.empty()
            ? caf::expected<placement_plan>(make_error(errc::invalid_config, "no node is alive"))
            : plan_job(alive, st.config.spec);
        if (!plan) {
          fail_job(self,
                   make_error(errc::invalid_config, "cannot re-place the job after a failure ("
                                                      + st.rec.failures().back()
                                                      + "): " + error_text(plan.error())));
          return;
        }
        st.config.nodes = std::move(nodes);
        st.config.node_names = std::move(node_names);
        st.config.placement = job_placement_of(*plan);
        std::string where;
        for (auto& n : st.config.node_names)
          where += (where.empty() ? "" : ",") + n;
        spdlog::info("job_replaced nodes={} actors={}", where, plan->actors.size());
        next();
      },
      [self, gen](const caf::error& e) {
        fail_job(self,
                 make_error(errc::peer_failure, "asking which nodes are alive: " + error_text(e)));
      });
}

void on_failure(self_ptr self, uint64_t gen, const std::string& reason) {
  auto& st = self->state;
  auto resume = st.cuts.resume_step();
  auto d = st.rec.on_failure(gen, st.generation, st.done && st.done->pending(), reason,
                             self->clock().now(), resume);
  if (d.what == recovery::action::ignore)
    return;
  if (d.what == recovery::action::after_training) {  // finish() reads what is left
    spdlog::warn("job_failure_after_training reason=\"{}\"", reason);
    return;
  }
  st.progress.last_failure = reason;
  for (auto& p : st.on_demand)
    p.deliver(make_error(errc::peer_failure, "the job failed before the checkpoint: " + reason));
  st.on_demand.clear();
  if (d.what == recovery::action::give_up) {
    auto& sv = st.config.spec.supervision;
    fail_job(self, make_error(errc::peer_failure,
                              "restart intensity exceeded (" + std::to_string(sv.max_restarts)
                                + " restarts within " + std::to_string(sv.window_s)
                                + " s); last failure: " + reason));
    return;
  }
  // Rolled back to the newest checkpoint (recovery.hpp): progress restarts from it, and cuts
  // after it are trained again; their validations evaluated again.
  st.progress.restarts += 1;
  st.progress.batches_replayed += d.replayed;
  st.progress.samples = st.cuts.committed_samples();
  st.progress.steps = resume;
  st.trainer_steps.assign(st.trainer_steps.size(), resume);
  st.cuts.roll_back();
  st.best.roll_back();
  spdlog::warn("job_restarting reason=\"{}\" restart={} resume_step={} batches_replayed={}", reason,
               st.progress.restarts, resume, d.replayed);
  notify(st);
  ++st.generation;  // from here on, the old generation's replies and exits are stale
  for (auto& [addr, node] : st.children)
    if (auto a = caf::actor_cast<caf::actor>(addr))
      self->send_exit(a, caf::exit_reason::kill);
  st.children.clear();
  // Give the cluster a moment to notice a lost node before asking who is alive.
  auto gen_now = st.generation;
  self->delayed_send(self, ms(st.config.spec.timing.replan_delay_ms), restore_atom::value, gen_now);
}

void on_applied(self_ptr self, uint64_t gen, int64_t step, int32_t rank) {
  auto& st = self->state;
  st.progress.batches_replayed += st.rec.on_applied(gen, st.generation, step, rank);
}

void on_exit(self_ptr self, caf::exit_msg& msg) {
  auto& st = self->state;
  auto it = st.children.find(msg.source);
  if (it == st.children.end()) {
    // Not a child of this generation: one we stopped (ignored), or whoever runs the job
    // shutting it down (cancel).
    if (msg.reason == caf::exit_reason::user_shutdown)
      self->quit(msg.reason);
    return;
  }
  auto node = it->second;
  st.children.erase(it);
  if (msg.reason == caf::exit_reason::remote_link_unreachable) {
    st.rec.node_lost(node);
    on_failure(self, st.generation,
               "node " + node + " lost (connection dropped or heartbeats stopped)");
  } else if (msg.reason) {
    auto what = "an actor on node " + node + " failed: " + error_text(msg.reason);
    // A configuration or resource error (out of memory, disk full) would fail again after a
    // restart: the job fails at once, with the actor's own message.
    if (failure_is_deterministic(msg.reason) && st.done && st.done->pending()
        && !st.rec.is_finishing()) {
      fail_job(self, make_error(errc_of(msg.reason, errc::no_resource), what));
      return;
    }
    on_failure(self, st.generation, what);
  }
}

}  // namespace satrap::supervisor
