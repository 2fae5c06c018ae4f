#include "actors/admin/admin.hpp"

#include "actors/admin/admin_state.hpp"
#include "actors/peer_guard.hpp"
#include "runtime/error.hpp"
#include "runtime/memory_release.hpp"
#include "runtime/secrets.hpp"

#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

namespace satrap {

const char* job_state_name(job_state s) {
  switch (s) {
    case job_state::pending: return "PENDING";
    case job_state::placing: return "PLACING";
    case job_state::running: return "RUNNING";
    case job_state::succeeded: return "SUCCEEDED";
    case job_state::failed: return "FAILED";
    case job_state::cancelled: return "CANCELLED";
  }
  return "FAILED";
}

job_state job_state_from_name(const std::string& name) {
  for (auto s : all_job_states)
    if (name == job_state_name(s))
      return s;
  return job_state::failed;
}

bool job_state_final(job_state s) {
  return s == job_state::succeeded || s == job_state::failed || s == job_state::cancelled;
}

job_record* find_job(admin_state& st, const std::string& id) {
  for (auto& j : st.jobs)
    if (j.id == id)
      return &j;
  return nullptr;
}

namespace {

// The admin's implementation: stateful, and deaf to exit messages from other processes.
using admin_impl = exit_guard<caf::stateful_actor<admin_state, admin_actor::base>>;
using self_ptr = admin_impl*;
std::chrono::milliseconds tick_interval(const admin_state& st) { return ms(st.config.timing.admin_tick_ms); }

void try_start(self_ptr self);

void job_end(self_ptr self, const std::string& id, job_state state,
             const std::string& message) {
  auto& st = self->state;
  if (auto* j = find_job(st, id); j && !job_state_final(j->state)) {
    j->state = state;
    j->message = message;
    j->ended_ms = now_ms();
    spdlog::info("job_ended id={} state={} message=\"{}\"", id, job_state_name(state), message);
  }
  if (st.running && st.running->id == id)
    st.running.reset();
  jobs_save(st);
  try_start(self);
}

// Counts and logs a refused request; the reply to send.
caf::error refuse(self_ptr self, const char* what, const std::string& reason) {
  ++self->state.refused[what];
  spdlog::warn("request_refused what={} peer={} reason=\"{}\"", what, peer_text(self), reason);
  return make_error(errc::unauthorized, reason);
}

caf::error check_token(self_ptr self, const char* what, const std::string& token) {
  if (token_equal(token, self->state.config.token))
    return caf::none;
  ++self->state.requests_refused;
  return refuse(self, what, "admin token refused");
}

caf::result<std::string> on_register(self_ptr self, node_info& info) {
  auto& st = self->state;
  auto refuse = [&](const std::string& why) -> caf::result<std::string> {
    ++st.registrations_refused;
    ++st.refused["register"];
    spdlog::warn("node_refused name={} peer={} reason=\"{}\"", info.name, peer_text(self), why);
    return make_error(errc::invalid_config, why);
  };
  // Identity first: the agent must live in the process that sends this, and that process must
  // hold the node's token; a live node's name is not taken over by another process.
  // (An anonymous message has no sender; a remote sender always has its process's node id.)
  auto& sender = self->current_sender();
  if (!info.agent || !sender || info.agent.node() != sender->node())
    return refuse("node '" + info.name + "': the agent does not belong to the process that "
                  "registers it");
  auto tok = st.config.node_tokens.find(info.name);
  if (tok == st.config.node_tokens.end() || !token_equal(info.token, tok->second)) {
    return refuse("node '" + info.name + "': node token refused (each node needs its "
                  "node-<name>.token from the head's state dir)");
  }
  if (auto it = st.nodes.find(info.name); it != st.nodes.end() && it->second.alive
                                          && it->second.info.agent.node() != sender->node()) {
  {
    // Not final for the node: the old process may be dead without the head having seen it yet.
    ++st.registrations_refused;
    ++st.refused["register"];
    spdlog::warn("node_refused name={} peer={} reason=already_registered_by_a_live_process",
                 info.name, peer_text(self));
    return make_error(errc::peer_failure, "node '" + info.name
                                            + "' is registered by another live process");
  }
  }
  if (info.cluster != st.config.cluster.cluster)
    return refuse("node '" + info.name + "' belongs to cluster '" + info.cluster
                  + "', this head runs cluster '" + st.config.cluster.cluster + "'");
  if (info.version != st.config.version)
    return refuse("node '" + info.name + "' runs satrap " + info.version + ", the head runs "
                  + st.config.version);
  auto known = std::any_of(st.config.cluster.nodes.begin(), st.config.cluster.nodes.end(),
                           [&](auto& n) { return n.name == info.name; });
  if (!known)
    return refuse("node '" + info.name + "' is not in the manifest of cluster '"
                  + st.config.cluster.cluster + "'");
  auto& entry = st.nodes[info.name];
  if (entry.info.agent && entry.info.agent.node() != info.agent.node())
    ++entry.rejoins;  // the same node name from a new process
  st.supervisor_gave_up.erase(info.name);
  entry.info = info;
  entry.info.token.clear();  // not kept: /status and logs never see it
  entry.alive = true;
  entry.last_heartbeat = self->clock().now();
  self->monitor(info.agent);
  spdlog::info("node_joined name={} restarts={} rejoins={}", info.name, info.restarts,
               entry.rejoins);
  try_start(self);
  return st.config.cluster.cluster;
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  auto now = self->clock().now();
  for (auto& [name, n] : st.nodes)
    if (n.alive && now - n.last_heartbeat > ms(st.config.timing.heartbeat_timeout_ms)) {
      n.alive = false;
      spdlog::warn("node_lost name={} reason=heartbeat_timeout", name);
    }
  try_start(self);
  self->delayed_send(self, tick_interval(st), tick_atom::value, st.internal_key);
}

void on_down(self_ptr self, const caf::down_msg& dm) {
  for (auto& [name, n] : self->state.nodes)
    if (n.info.agent && n.info.agent.address() == dm.source && n.alive) {
      n.alive = false;
      spdlog::warn("node_lost name={} reason=connection", name);
    }
}

// Places and runs the first pending job once every node of the manifest is alive.
void try_start(self_ptr self) {
  auto& st = self->state;
  if (st.running)
    return;
  auto it = std::find_if(st.jobs.begin(), st.jobs.end(),
                         [](auto& j) { return j.state == job_state::pending; });
  if (it == st.jobs.end())
    return;
  std::string waiting;
  for (auto& n : st.config.cluster.nodes)
    if (!st.nodes.count(n.name) || !st.nodes[n.name].alive)
      waiting += (waiting.empty() ? "" : ", ") + n.name;
  if (!waiting.empty()) {
    it->message = "waiting for nodes: " + waiting;
    return;
  }
  auto id = it->id;
  it->state = job_state::placing;
  it->message = "";
  // Validated at submission, but the table may come from disk (jobs.json) or an older head:
  // a spec that no longer loads fails the job with the reason, never runs defaults.
  auto spec = job_spec_defaults();
  auto err = job_spec_load_text(it->spec_yaml, "job " + id, spec);
  if (!err)
    err = job_spec_finalize(spec);
  if (err) {
    job_end(self, id, job_state::failed, "the job's spec does not load: " + error_text(err));
    return;
  }
  auto plan = plan_job(st.config.cluster, spec);
  if (!plan) {
    job_end(self, id, job_state::failed, error_text(plan.error()));
    return;
  }
  running_job r;
  r.id = id;
  r.plan = *plan;
  job_supervisor_config c;
  c.spec = spec;
  for (auto& n : st.config.cluster.nodes) {
    c.nodes.push_back(st.nodes[n.name].info.agent);
    c.node_names.push_back(n.name);
    r.plan_nodes.push_back(n.name);
  }
  c.placement = job_placement_of(*plan);
  c.cluster = st.config.cluster;
  c.directory = caf::actor_cast<node_directory_actor>(self);
  c.observer = [admin = caf::actor_cast<admin_actor>(self), id,
                key = st.internal_key](const job_progress& p) {
    caf::anon_send(admin, progress_atom::value, id, p, key);
  };
  r.supervisor = spawn_job_supervisor(self->system(), c);
  // Its job's memory back to the system once it has stopped (runtime/memory_release.hpp).
  r.supervisor->attach_functor([] { memory_release("job_supervisor_stopped"); });
  r.last_progress = self->clock().now();
  st.running = std::move(r);
  it->state = job_state::running;
  it->started_ms = now_ms();
  jobs_save(st);
  spdlog::info("job_running id={} actors={}", id, plan->actors.size());
  self->request(st.running->supervisor, caf::infinite, run_atom::value)
    .then(
      [self, id](job_result& res) {
        if (auto* j = find_job(self->state, id)) {
          j->test_auc = res.test_auc;
          j->oracle_auc = std::isnan(res.oracle_auc) ? -1 : res.oracle_auc;
          j->test_logloss = res.test_logloss;
          j->samples = res.samples;
          j->samples_per_sec = res.samples_per_sec;
          j->steps = j->steps_total;
          j->restarts = std::max(j->restarts, res.restarts);
          j->batches_replayed = res.batches_replayed;
          j->checkpoints = res.checkpoints;
          j->gradients_lost = res.gradients_lost;
          if (res.best_step >= 0) {
            j->best_step = res.best_step;
            j->best_validation_auc = res.validation_auc;
          }
        }
        job_end(self, id, job_state::succeeded, "");
      },
      [self, id](const caf::error& e) { job_end(self, id, job_state::failed, error_text(e)); });
}

caf::result<std::string> on_submit(self_ptr self, const std::string& token,
                                   const std::string& yaml) {
  auto& st = self->state;
  if (auto err = check_token(self, "submit", token))
    return err;
  auto spec = job_spec_defaults();
  if (auto err = job_spec_load_text(yaml, "job", spec))
    return err;
  if (auto err = job_spec_finalize(spec))
    return err;
  // A job that cannot fit the cluster (memory, cores, GPUs: too many shards, an over-large
  // sketch) is refused now, with what is missing, rather than failing when it would start.
  if (auto plan = plan_job(st.config.cluster, spec); !plan)
    return plan.error();
  job_record j;
  j.id = "j" + std::to_string(st.next_id++);
  j.name = spec.name;
  j.submitted_ms = now_ms();
  j.spec_yaml = job_spec_to_yaml(spec);
  if (auto back = job_spec_from_wire(j.spec_yaml, "job"); !back)
    return back.error();  // what the nodes would receive must be this very spec
  st.jobs.push_back(j);
  spdlog::info("job_submitted id={} name={}", j.id, j.name);
  jobs_save(st);
  try_start(self);
  return j.id;
}

caf::result<job_record> on_cancel(self_ptr self, const std::string& token, const std::string& id) {
  auto& st = self->state;
  if (auto err = check_token(self, "cancel", token))
    return err;
  auto* j = find_job(st, id);
  if (!j)
    return make_error(errc::invalid_config, "no job '" + id + "'");
  if (job_state_final(j->state))
    return make_error(errc::invalid_config, "job " + id + " already ended (" + job_state_name(j->state) + ")");
  if (st.running && st.running->id == id)
    self->send_exit(st.running->supervisor, caf::exit_reason::user_shutdown);
  job_end(self, id, job_state::cancelled, "cancelled by the admin");
  return *find_job(st, id);
}

void on_progress(self_ptr self, const std::string& id, const job_progress& p) {
  auto& st = self->state;
  auto* j = find_job(st, id);
  if (!j || !st.running || st.running->id != id)
    return;
  auto now = self->clock().now();
  auto& r = *st.running;
  if (p.steps > r.last_steps) {
    auto secs = std::chrono::duration<double>(now - r.last_progress).count();
    auto steps = p.steps - r.last_steps;
    st.step_latency.observe(secs / static_cast<double>(steps), steps);
  }
  r.last_progress = now;
  r.last_steps = p.steps;
  job_apply_progress(*j, p);
  history_record(st, *j);
}

}  // namespace

admin_actor spawn_admin(caf::actor_system& sys, const admin_config& config) {
  return sys.spawn([config](self_ptr self) -> admin_actor::behavior_type {
    auto& st = self->state;
    st.config = config;
    jobs_load(st);
    jobs_save(st);
    self->set_down_handler([self](caf::down_msg& dm) { on_down(self, dm); });
    st.internal_key = std::stoull(random_token(8), nullptr, 16);
    self->delayed_send(self, tick_interval(st), tick_atom::value, st.internal_key);
    return {
      [self](register_atom, node_info& info) { return on_register(self, info); },
      [self](heartbeat_atom, const std::string& name, std::vector<actor_stat>& actors) {
        auto it = self->state.nodes.find(name);
        if (it == self->state.nodes.end()) {
          refuse(self, "heartbeat", "node '" + name + "' has not registered");
          return;
        }
        // Only the process that registered the name keeps it alive.
        if (!it->second.info.agent || sender_node(self) != it->second.info.agent.node()) {
          refuse(self, "heartbeat", "heartbeat for node '" + name + "' from another process");
          return;
        }
        auto now = self->clock().now();
        auto secs = std::chrono::duration<double>(now - it->second.last_heartbeat).count();
        std::vector<node_entry::actor_row> rows;
        for (auto& a : actors) {
          node_entry::actor_row row{a, 0.0};
          for (auto& old : it->second.actors)
            if (old.stat.role == a.role && old.stat.index == a.index && old.stat.job == a.job
                && a.messages >= old.stat.messages && secs > 0)
              row.messages_per_sec = static_cast<double>(a.messages - old.stat.messages) / secs;
          rows.push_back(std::move(row));
        }
        it->second.actors = std::move(rows);
        it->second.last_heartbeat = now;
        ++it->second.heartbeats;
        if (!it->second.alive)
          spdlog::info("node_alive name={}", name);
        it->second.alive = true;
      },
      [self](submit_atom, const std::string& token, const std::string& yaml) {
        return on_submit(self, token, yaml);
      },
      [self](list_atom, const std::string& token) -> caf::result<std::vector<job_record>> {
        if (auto err = check_token(self, "list", token))
          return err;
        return self->state.jobs;
      },
      [self](get_atom, const std::string& token,
             const std::string& id) -> caf::result<job_record> {
        if (auto err = check_token(self, "get", token))
          return err;
        if (auto* j = find_job(self->state, id))
          return *j;
        return make_error(errc::invalid_config, "no job '" + id + "'");
      },
      [self](cancel_atom, const std::string& token, const std::string& id) {
        return on_cancel(self, token, id);
      },
      [self](checkpoint_atom, const std::string& token,
             const std::string& id) -> caf::result<int64_t> {
        auto& st = self->state;
        if (auto err = check_token(self, "checkpoint", token))
          return err;
        if (!st.running || st.running->id != id)
          return make_error(errc::invalid_config, "job '" + id + "' is not running");
        return self->delegate(st.running->supervisor, checkpoint_atom::value);
      },
      [self](nodes_atom)
        -> caf::result<std::vector<std::string>, std::vector<node_agent_actor>> {
        if (!sender_is_local(self))  // agent handles: for this process's job supervisors only
          return refuse(self, "nodes", "node handles are not given to other processes");
        std::vector<std::string> names;
        std::vector<node_agent_actor> agents;
        for (auto& [name, n] : self->state.nodes)
          if (n.alive) {
            names.push_back(name);
            agents.push_back(n.info.agent);
          }
        return caf::make_result(std::move(names), std::move(agents));
      },
      [self](status_atom) { return render_status(self->state, self->clock().now()); },
      [self](metrics_atom) { return render_metrics(self->state); },
      [self](ready_atom) {
        auto& st = self->state;
        std::string waiting;
        for (auto& n : st.config.cluster.nodes)
          if (!st.nodes.count(n.name) || !st.nodes[n.name].alive)
            waiting += (waiting.empty() ? "" : ", ") + n.name;
        return caf::make_result(waiting.empty(), waiting);
      },
      [self](progress_atom, const std::string& id, const job_progress& p, uint64_t key) {
        if (key != self->state.internal_key) {
          refuse(self, "progress", "progress without the admin's key");
          return;
        }
        on_progress(self, id, p);
      },
      [self](tick_atom, uint64_t key) {
        if (key != self->state.internal_key) {
          refuse(self, "tick", "tick without the admin's key");
          return;
        }
        on_tick(self);
      },
      [self](gave_up_atom, const std::string& token, const std::string& node, int64_t restarts,
             const std::string& why) -> caf::result<bool> {
        if (auto err = check_token(self, "gave_up", token))
          return err;
        auto& st = self->state;
        spdlog::error("node_supervisor_gave_up name={} restarts={} reason=\"{}\"", node, restarts,
                      why);
        st.supervisor_gave_up[node] = why;
        if (auto it = st.nodes.find(node); it != st.nodes.end())
          it->second.info.restarts = std::max(it->second.info.restarts, restarts);
        return true;
      },
    };
  });
}

}  // namespace satrap
