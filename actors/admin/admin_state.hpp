// The admin actor's state, shared by its behaviour (admin.cpp), its node registry
// (admin_nodes.cpp), its job table (admin_jobs.cpp; on disk: admin_store.cpp) and its renderings
// for the status endpoint (admin_render.cpp). Internal to actors/admin/.
#pragma once

#include "actors/admin/admin.hpp"
#include "actors/peer_guard.hpp"
#include "actors/admin/job_history.hpp"
#include "spec/placement.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <vector>

#include <caf/typed_response_promise.hpp>

namespace satrap {

struct node_entry {
  node_info info;
  bool alive = false;
  std::chrono::steady_clock::time_point last_heartbeat;
  int64_t heartbeats = 0;
  int64_t rejoins = 0;  // registrations from a new process after the first
  bool local = false;   // an embedded admin's own node: alive while the admin lives
  // The node's role actors as of its last heartbeat, with messages/s since the one before.
  struct actor_row {
    actor_stat stat;
    double messages_per_sec = 0;
  };
  std::vector<actor_row> actors;
};

struct running_job {
  std::string id;
  job_supervisor_actor supervisor;
  placement_plan plan;
  std::vector<std::string> plan_nodes;  // node name per plan node index
  std::chrono::steady_clock::time_point last_progress;
  int64_t last_steps = 0;
};

// Step latency histogram (seconds), fed from progress reports.
struct latency_histogram {
  static constexpr double bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0};
  std::vector<int64_t> counts = std::vector<int64_t>(std::size(bounds) + 1, 0);
  double sum = 0;
  int64_t count = 0;
  void observe(double seconds, int64_t times);
};

struct admin_state {
  admin_config config;
  std::map<std::string, node_entry> nodes;  // by name
  std::vector<job_record> jobs;             // in submission order
  std::optional<running_job> running;
  int64_t next_id = 1;
  int64_t registrations_refused = 0;
  int64_t requests_refused = 0;            // bad admin token
  std::map<std::string, int64_t> refused;  // refused requests by what was asked (/metrics)
  uint64_t internal_key = 0;               // carried by its own ticks and its jobs' progress
  std::map<std::string, std::string> supervisor_gave_up;  // node -> why its supervisor gave up
  latency_histogram step_latency;
  // Progress over time of the newest jobs, for the dashboard's plots (admin_render.cpp).
  std::map<std::string, job_history> history;  // by job id
  // Who waits for a job's result (run_atom, this process only), by job id.
  std::map<std::string, std::vector<caf::typed_response_promise<job_result>>> awaiting;
  static constexpr size_t history_jobs =
    4;  // jobs whose history is kept (/status carries them all)
  static inline const char* name = "admin";
};

job_record* find_job(admin_state& st, const std::string& id);

// Persistence (admin_store.cpp).
void jobs_save(const admin_state& st);
// A running job's progress into its record (restarts = the job's own + the head's).
void job_apply_progress(job_record& j, const job_progress& p);
void jobs_load(admin_state& st);

// The actors of a node, as reported at `now` (heartbeat or tick), with messages/s since the last.
void node_actors_update(node_entry& n, std::vector<actor_stat>& actors,
                        std::chrono::steady_clock::time_point now);

// Renderings (admin_render.cpp).
// `now` is the admin's actor clock (heartbeat ages).
std::string render_status(const admin_state& st, std::chrono::steady_clock::time_point now);
std::string render_metrics(const admin_state& st);
// Adds the job's newest progress to its history (for /status's plots).
void history_record(admin_state& st, const job_record& j);

// Now, unix epoch milliseconds, on the config's env (stamps for people: submitted, history).
int64_t now_ms(const admin_state& st);
// The record's spec parsed from its spec_yaml (load + finalize): record.spec, or spec_error.
void job_parse_spec(job_record& j);

// ---- the admin's handlers, by concern ------------------------------------------------------

namespace admin_detail {

// The admin's own timer tick, which no other actor sends (it carries a key drawn at spawn): not on
// the public handle (admin.hpp).
using admin_impl_actor = admin_actor::extend<caf::reacts_to<tick_atom, uint64_t>>;
// The admin's implementation: stateful, and deaf to exit messages from other processes.
using admin_impl = exit_guard<caf::stateful_actor<admin_state, admin_impl_actor::base>>;
using self_ptr = admin_impl*;

// admin.cpp: the behaviour and its checks.
std::chrono::milliseconds tick_interval(const admin_state& st);
// Counts and logs a refused request; the reply to send.
caf::error refuse(self_ptr self, const char* what, const std::string& reason);
caf::error check_token(self_ptr self, const char* what, const std::string& token);

// admin_nodes.cpp: the node registry.
// The manifest's nodes not alive now, comma-separated ("": every node is alive).
std::string nodes_waiting(const admin_state& st);
caf::result<std::string> on_register(self_ptr self, node_info& info);
void on_heartbeat(self_ptr self, const std::string& name, std::vector<actor_stat>& actors);
// Marks nodes whose heartbeats stopped as lost, tries to start a job, ticks again.
void on_tick(self_ptr self);
void on_down(self_ptr self, const caf::down_msg& dm);

// admin_jobs.cpp: the job table.
// Places and runs the first pending job once every node of the manifest is alive.
void try_start(self_ptr self);
caf::result<std::string> on_submit(self_ptr self, const std::string& token,
                                   const std::string& yaml);
// run_atom: submits, then answers the job's result when it ends (this process only).
caf::result<job_result> on_run(self_ptr self, const std::string& token, const std::string& yaml);
caf::result<job_record> on_cancel(self_ptr self, const std::string& token, const std::string& id);
void on_progress(self_ptr self, const std::string& id, const job_progress& p);

}  // namespace admin_detail

}  // namespace satrap
