#include "actors/admin/admin.hpp"

#include "actors/admin/admin_state.hpp"
#include "actors/peer_guard.hpp"
#include "runtime/error.hpp"
#include "runtime/log.hpp"
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

admin_refusal refusal_of(const caf::error& e) {
  return errc_of(e, errc::peer_failure) == errc::unauthorized ? admin_refusal::unauthorized
                                                              : admin_refusal::conflict;
}

job_record* find_job(admin_state& st, const std::string& id) {
  for (auto& j : st.jobs)
    if (j.id == id)
      return &j;
  return nullptr;
}

namespace admin_detail {

std::chrono::milliseconds tick_interval(const admin_state& st) {
  return ms(st.config.timing.admin_tick_ms);
}

// Counts and logs a refused request; the reply to send.
caf::error refuse(self_ptr self, const char* what, const std::string& reason) {
  ++self->state.refused[what];
  static log_rate rate{10};  // forged messages by the thousand must not fill the log
  uint64_t unlogged = 0;
  if (rate.allow(unlogged))
    spdlog::warn("request_refused what={} peer={} reason=\"{}\" unlogged_before={}", what,
                 peer_text(self), reason, unlogged);
  return make_error(errc::unauthorized, reason);
}

caf::error check_token(self_ptr self, const char* what, const std::string& token) {
  if (token_equal(token, self->state.config.token))
    return caf::none;
  ++self->state.requests_refused;
  return refuse(self, what, "admin token refused");
}

}  // namespace admin_detail

using namespace admin_detail;

admin_actor spawn_admin(caf::actor_system& sys, const admin_config& config) {
  return caf::actor_cast<admin_actor>(
    sys.spawn([config](self_ptr self) -> admin_impl_actor::behavior_type {
      auto& st = self->state;
      st.config = config;
      jobs_load(st);
      jobs_save(st);
      if (st.config.embedded.on)  // its own nodes (this process): alive while it lives
        for (auto& n : st.config.cluster.nodes) {
          auto& e = st.nodes[n.name];
          e.info.cluster = st.config.cluster.cluster;
          e.info.version = st.config.version;
          e.info.name = n.name;
          e.alive = true;
          e.local = true;
          e.last_heartbeat = self->clock().now();
        }
      self->set_down_handler([self](caf::down_msg& dm) { on_down(self, dm); });
      st.internal_key = std::stoull(random_token(8), nullptr, 16);
      self->delayed_send(self, tick_interval(st), tick_atom::value, st.internal_key);
      return {
        [self](register_atom, node_info& info) { return on_register(self, info); },
        [self](heartbeat_atom, const std::string& name, std::vector<actor_stat>& actors) {
          on_heartbeat(self, name, actors);
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
        [self](nodes_atom) -> caf::result<std::vector<std::string>, std::vector<node_agent_actor>> {
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
          auto waiting = nodes_waiting(self->state);
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
        [self](run_atom, const std::string& token, const std::string& yaml)
          -> caf::result<job_result> { return on_run(self, token, yaml); },
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
    }));
}

}  // namespace satrap
