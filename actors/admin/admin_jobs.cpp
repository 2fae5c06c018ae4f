// The admin's job table: submission (checked and planned before it is accepted), starting the
// first pending job once every node is alive, progress from its supervisor, its end and cancel.
#include "actors/admin/admin_state.hpp"
#include "actors/embedded_job.hpp"
#include "runtime/broker_buffers.hpp"
#include "runtime/error.hpp"
#include "runtime/memory_release.hpp"

#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace satrap::admin_detail {

namespace {

// Answers whoever waits for the job's result (run_atom) with `outcome`.
template <class T>
void deliver(admin_state& st, const std::string& id, T outcome) {
  auto it = st.awaiting.find(id);
  if (it == st.awaiting.end())
    return;
  for (auto& p : it->second)
    p.deliver(outcome);
  st.awaiting.erase(it);
}

void job_end(self_ptr self, const std::string& id, job_state state, const std::string& message) {
  auto& st = self->state;
  if (auto* j = find_job(st, id); j && !job_state_final(j->state)) {
    j->state = state;
    j->message = message;
    j->ended_ms = now_ms(st);
    spdlog::info("job_ended id={} state={} message=\"{}\"", id, job_state_name(state), message);
  }
  // Anyone still waiting learns why (a result or the job's own error was delivered before).
  deliver(st, id,
          make_error(errc::peer_failure, message.empty() ? "job " + id + " ended" : message));
  if (st.running && st.running->id == id)
    st.running.reset();
  jobs_save(st);
  try_start(self);
}

}  // namespace

// Places and runs the first pending job once every node of the manifest is alive.
void try_start(self_ptr self) {
  auto& st = self->state;
  if (st.running)
    return;
  auto it = std::find_if(st.jobs.begin(), st.jobs.end(),
                         [](auto& j) { return j.state == job_state::pending; });
  if (it == st.jobs.end())
    return;
  if (auto waiting = nodes_waiting(st); !waiting.empty()) {
    it->message = "waiting for nodes: " + waiting;
    return;
  }
  auto id = it->id;
  it->state = job_state::placing;
  it->message = "";
  // Validated at submission, but the table may come from disk (jobs.json) or an older head:
  // a spec that no longer loads fails the job with the reason, never runs defaults.
  if (!it->spec) {
    job_end(self, id, job_state::failed, "the job's spec does not load: " + it->spec_error);
    return;
  }
  auto& spec = *it->spec;
  running_job r;
  r.id = id;
  job_supervisor_config c;
  c.spec = spec;
  if (st.config.embedded.on) {  // as an embedded job runs: every role on this process's agent
    if (st.config.embedded.configure)
      st.config.embedded.configure(c);
  } else {
    auto plan = plan_job(st.config.cluster, spec);
    if (!plan) {
      job_end(self, id, job_state::failed, error_text(plan.error()));
      return;
    }
    r.plan = *plan;
    for (auto& n : st.config.cluster.nodes) {
      c.nodes.push_back(st.nodes[n.name].info.agent);
      c.node_names.push_back(n.name);
      r.plan_nodes.push_back(n.name);
    }
    c.placement = job_placement_of(*plan);
    c.cluster = st.config.cluster;
    c.directory = caf::actor_cast<node_directory_actor>(self);
  }
  c.observer = [admin = caf::actor_cast<admin_actor>(self), id,
                key = st.internal_key](const job_progress& p) {
    caf::anon_send(admin, progress_atom::value, id, p, key);
  };
  r.supervisor = st.config.embedded.on ? spawn_embedded_job(self->system(), c)
                                       : spawn_job_supervisor(self->system(), c);
  // Its job's memory back to the system once it has stopped (runtime/memory_release.hpp), with
  // the broker's spare write buffer (runtime/broker_buffers.hpp: what was sent to lost nodes).
  r.supervisor->attach_functor(
    [&sys = self->system()] { broker_buffers_release(sys, "job_supervisor_stopped"); });
  r.last_progress = self->clock().now();
  st.running = std::move(r);
  it->state = job_state::running;
  it->started_ms = now_ms(st);
  jobs_save(st);
  spdlog::info("job_running id={} actors={}", id, st.running->plan.actors.size());
  self->request(st.running->supervisor, caf::infinite, run_atom::value)
    .then(
      [self, id](job_result& res) {
        if (auto* j = find_job(self->state, id)) {
          j->test_auc = res.test_auc;
          j->oracle_auc = std::isnan(res.oracle_auc) ? -1 : res.oracle_auc;
          j->test_logloss = res.test_logloss;
          j->task_test_auc.clear();
          if (res.task_names.size() > 1)
            for (size_t t = 0; t < res.task_names.size() && t < res.task_test_auc.size(); ++t)
              j->task_test_auc[res.task_names[t]] = res.task_test_auc[t];
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
        deliver(self->state, id, std::move(res));
        job_end(self, id, job_state::succeeded, "");
      },
      [self, id](const caf::error& e) {
        deliver(self->state, id, e);  // the job's own error: its code sets train's exit status
        job_end(self, id, job_state::failed, error_text(e));
      });
}

namespace {

caf::expected<std::string> accept(self_ptr self, const std::string& token,
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
  // (An embedded job runs as `satrap train` always ran it: not planned.)
  if (!st.config.embedded.on)
    if (auto plan = plan_job(st.config.cluster, spec); !plan)
      return plan.error();
  job_record j;
  j.id = "j" + std::to_string(st.next_id++);
  j.name = spec.name;
  j.submitted_ms = now_ms(st);
  j.spec_yaml = job_spec_to_yaml(spec);
  if (auto back = job_spec_from_wire(j.spec_yaml, "job"); !back)
    return back.error();  // what the nodes would receive must be this very spec
  j.spec = std::make_shared<const job_spec>(std::move(spec));
  auto id = j.id;
  spdlog::info("job_submitted id={} name={}", j.id, j.name);
  st.jobs.push_back(std::move(j));
  jobs_save(st);
  try_start(self);
  return id;
}

}  // namespace

caf::result<std::string> on_submit(self_ptr self, const std::string& token,
                                   const std::string& yaml) {
  auto id = accept(self, token, yaml);
  if (!id)
    return id.error();
  return *id;
}

caf::result<job_result> on_run(self_ptr self, const std::string& token, const std::string& yaml) {
  if (!sender_is_local(self))  // a job's whole result (its model): for this process only
    return refuse(self, "run", "a job's result is not given to other processes");
  auto id = accept(self, token, yaml);
  if (!id)
    return id.error();
  auto* j = find_job(self->state, *id);
  if (!j || job_state_final(j->state))
    return make_error(errc::peer_failure, j ? j->message : "no job");
  auto p = self->make_response_promise<job_result>();
  self->state.awaiting[j->id].push_back(p);
  return p;
}

caf::result<job_record> on_cancel(self_ptr self, const std::string& token, const std::string& id) {
  auto& st = self->state;
  if (auto err = check_token(self, "cancel", token))
    return err;
  auto* j = find_job(st, id);
  if (!j)
    return make_error(errc::invalid_config, "no job '" + id + "'");
  if (job_state_final(j->state))
    return make_error(errc::invalid_config,
                      "job " + id + " already ended (" + job_state_name(j->state) + ")");
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
  if (st.config.embedded.on_progress)
    st.config.embedded.on_progress(p);
}

}  // namespace satrap::admin_detail
