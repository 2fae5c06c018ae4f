// The atoms of satrap's typed messages, shared by every role (a CAF 0.17 atom is at most 10 chars).
#pragma once

#include <caf/atom.hpp>

namespace satrap {

using lookup_atom = caf::atom_constant<caf::atom("lookup")>;
using update_atom = caf::atom_constant<caf::atom("update")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;
using ids_atom = caf::atom_constant<caf::atom("ids")>;
using pooled_atom = caf::atom_constant<caf::atom("pooled")>;
using grads_atom = caf::atom_constant<caf::atom("grads")>;
using chunk_atom = caf::atom_constant<caf::atom("chunk")>;
using applied_atom = caf::atom_constant<caf::atom("applied")>;
using peers_atom = caf::atom_constant<caf::atom("peers")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using progress_atom = caf::atom_constant<caf::atom("progress")>;
// Cluster runtime.
using spawn_atom = caf::atom_constant<caf::atom("spawn")>;
using shard_atom = caf::atom_constant<caf::atom("shard")>;
using aggregator_atom = caf::atom_constant<caf::atom("aggregator")>;
using loader_atom = caf::atom_constant<caf::atom("loader")>;
using trainer_atom = caf::atom_constant<caf::atom("trainer")>;
using register_atom = caf::atom_constant<caf::atom("register")>;
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>;
using submit_atom = caf::atom_constant<caf::atom("submit")>;
using list_atom = caf::atom_constant<caf::atom("list")>;
using get_atom = caf::atom_constant<caf::atom("get")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using status_atom = caf::atom_constant<caf::atom("status")>;
using metrics_atom = caf::atom_constant<caf::atom("metrics")>;
using gave_up_atom = caf::atom_constant<caf::atom("gave_up")>;  // a per-host supervisor
// Checkpoints and recovery.
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;
using restore_atom = caf::atom_constant<caf::atom("restore")>;
using cut_atom = caf::atom_constant<caf::atom("cut")>;
using hold_atom = caf::atom_constant<caf::atom("hold")>;
using checkpoint_atom = caf::atom_constant<caf::atom("checkpoint")>;
using nodes_atom = caf::atom_constant<caf::atom("nodes")>;
using eval_atom = caf::atom_constant<caf::atom("eval")>;
// Cluster membership.
using ready_atom = caf::atom_constant<caf::atom("ready")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
// An actor's own request deadlines (runtime/request_watch.hpp).
using watch_atom = caf::atom_constant<caf::atom("watch")>;
using head_atom = caf::atom_constant<caf::atom("head")>;

}  // namespace satrap
