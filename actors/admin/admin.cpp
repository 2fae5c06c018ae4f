#include "actors/admin/admin.hpp"

#include "actors/admin/admin_state.hpp"
#include "runtime/error.hpp"

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

using self_ptr = admin_actor::stateful_pointer<admin_state>;
using std::chrono::steady_clock;
constexpr auto tick_interval = std::chrono::milliseconds(500);

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

caf::result<std::string> on_register(self_ptr self, node_info& info) {
  auto& st = self->state;
  auto refuse = [&](const std::string& why) -> caf::result<std::string> {
    ++st.registrations_refused;
    spdlog::warn("node_refused name={} reason=\"{}\"", info.name, why);
    return make_error(errc::invalid_config, why);
  };
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
  entry.alive = true;
  entry.last_heartbeat = steady_clock::now();
  self->monitor(info.agent);
  spdlog::info("node_joined name={} restarts={} rejoins={}", info.name, info.restarts,
               entry.rejoins);
  try_start(self);
  return st.config.cluster.cluster;
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  auto now = steady_clock::now();
  for (auto& [name, n] : st.nodes)
    if (n.alive && now - n.last_heartbeat > std::chrono::milliseconds(st.config.heartbeat_timeout_ms)) {
      n.alive = false;
      spdlog::warn("node_lost name={} reason=heartbeat_timeout", name);
    }
  try_start(self);
  self->delayed_send(self, tick_interval, heartbeat_atom::value);
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
  c.observer = [admin = caf::actor_cast<admin_actor>(self), id](const job_progress& p) {
    caf::anon_send(admin, progress_atom::value, id, p);
  };
  r.supervisor = spawn_job_supervisor(self->system(), c);
  r.last_progress = steady_clock::now();
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
        }
        job_end(self, id, job_state::succeeded, "");
      },
      [self, id](const caf::error& e) { job_end(self, id, job_state::failed, error_text(e)); });
}

caf::result<std::string> on_submit(self_ptr self, const std::string& token,
                                   const std::string& yaml) {
  auto& st = self->state;
  if (token != st.config.token) {
    ++st.requests_refused;
    return make_error(errc::invalid_config, "admin token refused");
  }
  auto spec = job_spec_defaults();
  if (auto err = job_spec_load_text(yaml, "job", spec))
    return err;
  if (auto err = job_spec_finalize(spec))
    return err;
  job_record j;
  j.id = "j" + std::to_string(st.next_id++);
  j.name = spec.name;
  j.submitted_ms = now_ms();
  j.spec_yaml = job_spec_to_yaml(spec);
  st.jobs.push_back(j);
  spdlog::info("job_submitted id={} name={}", j.id, j.name);
  jobs_save(st);
  try_start(self);
  return j.id;
}

caf::result<job_record> on_cancel(self_ptr self, const std::string& token, const std::string& id) {
  auto& st = self->state;
  if (token != st.config.token) {
    ++st.requests_refused;
    return make_error(errc::invalid_config, "admin token refused");
  }
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
  auto now = steady_clock::now();
  auto& r = *st.running;
  if (p.steps > r.last_steps) {
    auto secs = std::chrono::duration<double>(now - r.last_progress).count();
    auto steps = p.steps - r.last_steps;
    st.step_latency.observe(secs / static_cast<double>(steps), steps);
  }
  r.last_progress = now;
  r.last_steps = p.steps;
  job_apply_progress(*j, p);
}

}  // namespace

admin_actor spawn_admin(caf::actor_system& sys, const admin_config& config) {
  return sys.spawn([config](self_ptr self) -> admin_actor::behavior_type {
    auto& st = self->state;
    st.config = config;
    jobs_load(st);
    jobs_save(st);
    self->set_down_handler([self](caf::down_msg& dm) { on_down(self, dm); });
    self->delayed_send(self, tick_interval, heartbeat_atom::value);
    return {
      [self](register_atom, node_info& info) { return on_register(self, info); },
      [self](heartbeat_atom, const std::string& name, std::vector<actor_stat>& actors) {
        auto it = self->state.nodes.find(name);
        if (it == self->state.nodes.end())
          return;
        auto now = steady_clock::now();
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
      [self](list_atom) { return self->state.jobs; },
      [self](get_atom, const std::string& id) -> caf::result<job_record> {
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
        if (token != st.config.token) {
          ++st.requests_refused;
          return make_error(errc::invalid_config, "admin token refused");
        }
        if (!st.running || st.running->id != id)
          return make_error(errc::invalid_config, "job '" + id + "' is not running");
        return self->delegate(st.running->supervisor, checkpoint_atom::value);
      },
      [self](nodes_atom) {
        std::vector<std::string> names;
        std::vector<node_agent_actor> agents;
        for (auto& [name, n] : self->state.nodes)
          if (n.alive) {
            names.push_back(name);
            agents.push_back(n.info.agent);
          }
        return caf::make_result(std::move(names), std::move(agents));
      },
      [self](status_atom) { return render_status(self->state); },
      [self](metrics_atom) { return render_metrics(self->state); },
      [self](progress_atom, const std::string& id, const job_progress& p) {
        on_progress(self, id, p);
      },
      [self](heartbeat_atom) { on_tick(self); },
      [self](gave_up_atom, const std::string& token, const std::string& node, int64_t restarts,
             const std::string& why) -> caf::result<bool> {
        auto& st = self->state;
        if (token != st.config.token) {
          ++st.requests_refused;
          return make_error(errc::invalid_config, "admin token refused");
        }
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
