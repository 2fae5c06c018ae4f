// admin: the head's cluster supervisor and job service, one actor.
//
// Nodes register here (node_info, refused for another cluster name or satrap version) and send
// heartbeats carrying their actors' counters (runtime/actor_meter.hpp); a node is alive while its heartbeats arrive and its connection stands. Users
// submit job YAML (with the admin token), list, get and cancel jobs. Jobs run one at a time, in
// submission order, once every node of the manifest is alive: the planner places the job's
// actors on the nodes, a job_supervisor spawns them through the node agents and runs them.
// States: PENDING, PLACING, RUNNING, SUCCEEDED, FAILED, CANCELLED. The job table is written to
// <state_dir>/jobs.json on every state change, so a restarted head lists past jobs; a job that
// was running when the head stopped is queued again to resume from its newest checkpoint when it
// has one (checkpoint.dir), else marked FAILED with that reason.
// nodes() lists the live nodes for a job supervisor re-placing a job after a failure;
// checkpoint(token, id) asks the running job for a checkpoint now.
// Node process restarts: a node reports how often its supervisor restarted it (node_info), the
// admin counts registrations from a new process of a node that had joined (rejoins), and a
// per-host supervisor that gave up on a node says so (gave_up); /status and /metrics show them.
// status() and metrics() render /status (JSON) and /metrics (Prometheus text) for the HTTP
// endpoint: the one producer of both, for a head and for an embedded job (admin_embedded).
// Refusals are caf::errors whose code says why (refusal_of: unauthorized or conflict).
// run(token, yaml) submits and answers the job's whole result when it ends (this process only:
// `satrap train`, whose admin is embedded, see admin_embedded).
// Time: read only through the actor clock (heartbeat ages, step latency), so a test clock drives
// it; the wall-clock stamps of the job table (submitted_ms, ...) and its file through
// admin_config::environment (models/env.hpp).
// Who may ask what (README "Security"): register and heartbeat only from a node's own process
// (the sender's node is the agent's node) with that node's token; a name stays bound to the
// process that registered it while that one is alive. Submit, cancel, checkpoint, list and get
// (specs) need the admin token (token_equal, constant time); nodes (agent handles) only from this
// process (the job supervisor). status, metrics and ready are public (what /status shows).
// Its timer tick and its jobs' progress carry a key drawn at spawn, so no one outside forges
// them; exit messages from other processes are dropped (actors/peer_guard.hpp). Refusals are
// logged with the peer's node id and counted in /metrics by reason.
// Threading: an actor; the HTTP thread talks to it with requests. admin_embedded's hooks run on
// the admin's thread.
#pragma once

#include "actors/admin/job_record.hpp"
#include "actors/job_supervisor/job_supervisor.hpp"
#include "actors/spawn_protocol.hpp"
#include "runtime/atoms.hpp"
#include "runtime/actor_meter.hpp"
#include "spec/knobs.hpp"
#include "spec/manifest.hpp"
#include "models/env.hpp"

#include <caf/actor_system.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace satrap {

// What a node says when it joins.
struct node_info {
  std::string cluster;
  std::string version;
  std::string name;
  node_agent_actor agent;
  std::string token;     // this node's token (node-<name>.token); never logged
  int64_t restarts = 0;  // times this node's process was started again (by its supervisor)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_info& x) {
  return f(caf::meta::type_name("node_info"), x.cluster, x.version, x.name, x.agent, x.token,
           x.restarts);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_progress& x) {
  return f(caf::meta::type_name("job_progress"), x.steps, x.steps_total, x.samples,
           x.samples_per_sec, x.loss, x.running_auc, x.restarts, x.batches_replayed, x.checkpoints,
           x.checkpoint_step, x.last_failure, x.validation_step, x.validation_auc,
           x.validation_logloss, x.best_step, x.best_validation_auc, x.stream_lag, x.tier_hits,
           x.tier_misses, x.tier_prefetch_hits, x.tier_bytes_read, x.tier_bytes_written,
           x.tier_ram_bytes);
}

using admin_actor = caf::typed_actor<
  caf::replies_to<register_atom, node_info>::with<std::string>,               // -> cluster name
  caf::reacts_to<heartbeat_atom, std::string, std::vector<actor_stat>>,       // node, its actors
  caf::replies_to<submit_atom, std::string, std::string>::with<std::string>,  // token, yaml -> id
  caf::replies_to<list_atom, std::string>::with<std::vector<job_record>>,     // token
  caf::replies_to<get_atom, std::string, std::string>::with<job_record>,      // token, id
  caf::replies_to<cancel_atom, std::string, std::string>::with<job_record>,   // token, id
  caf::replies_to<checkpoint_atom, std::string, std::string>::with<int64_t>,  // token, id -> step
  caf::replies_to<nodes_atom>::with<std::vector<std::string>, std::vector<node_agent_actor>>,
  caf::replies_to<status_atom>::with<std::string>,       // /status JSON
  caf::replies_to<metrics_atom>::with<std::string>,      // /metrics text
  caf::replies_to<ready_atom>::with<bool, std::string>,  // every node alive? / who is missing
  caf::reacts_to<progress_atom, std::string, job_progress, uint64_t>,  // from its observer (key)
  // From a per-host supervisor (`satrap supervise`) that stopped restarting a node:
  // token, node, restarts, why.
  caf::replies_to<gave_up_atom, std::string, std::string, int64_t, std::string>::with<bool>,
  // From this process only (`satrap train`): token, yaml -> the job's result once it ends (its
  // error when it fails or is cancelled). Submits as submit does.
  caf::replies_to<run_atom, std::string, std::string>::with<job_result>>;

// Why the admin refused a request, from its error's code (one place, not the text): unauthorized
// (no or a wrong token, a request only this process may make) or conflict (no such job, a job not
// in the state the request needs, a job that did not answer). The HTTP layer maps it to a status.
enum class admin_refusal : uint8_t { unauthorized, conflict };
admin_refusal refusal_of(const caf::error& e);

// An admin whose one node is this process (`satrap train`): it spawns the node agent "local"
// itself, which is alive while the admin lives (no heartbeats: its actors' counters are read at
// every tick), and runs the job as an embedded job runs (no placement plan, no re-placing).
struct admin_embedded {
  bool on = false;
  // No controls: the dashboard shows none and the HTTP layer refuses every POST (no admin token
  // was given to `satrap train`).
  bool read_only = true;
  // Called on the job supervisor's config before the job is spawned (e.g. final_snapshot_dir).
  std::function<void(job_supervisor_config&)> configure;
  // Each progress report, from the admin's thread, after the admin took it (e.g. a progress line).
  std::function<void(const job_progress&)> on_progress;
};

struct admin_config {
  manifest cluster;       // the nodes that may join
  std::string version;    // nodes must run the same satrap version
  std::string token;      // needed to submit, cancel, checkpoint, list, get
  std::string state_dir;  // jobs.json lives here ("" = not persisted)
  cluster_timing timing;  // heartbeat timeout, tick (spec/knobs.hpp; the manifest's)
  std::map<std::string, std::string> node_tokens;  // by node name: what a node must show
  env* environment = &default_env();  // the job table's file and the clock of its stamps
  admin_embedded embedded;            // the head's admin when off
};

admin_actor spawn_admin(caf::actor_system& sys, const admin_config& config);

}  // namespace satrap
