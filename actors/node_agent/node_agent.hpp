// node_agent: spawns a job's role actors on its node, on request of the job's supervisor.
//
// Protocol: actors/spawn_protocol.hpp (spawn a role's actor on request of the job supervisor).
// The job travels as its YAML text (job_spec_to_yaml): every node derives each role's config from
// the same spec (role_configs.hpp), so configs never cross the wire and a
// node running another satrap version refuses at registration rather than mid-job.
// In `satrap train` one agent runs in-process; in a cluster each `satrap node` runs one and
// publishes it on its port.
// Threading: an actor. A job's file data opens on a thread of its own (actors/job_data_opener.hpp).
#pragma once

#include "actors/spawn_protocol.hpp"
#include "models/env.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include <functional>

#include <string>
#include <vector>

namespace satrap {

struct node_agent_config {
  std::string node = "local";         // this node's name, for logs
  size_t jobs_kept = 2;               // recent jobs whose spec and opened data are kept for reuse
  bool audit = false;                 // shards keep an audit ledger (embedding_shard_config::audit)
  env* environment = &default_env();  // its shards' files (the simulator's env is in memory)
  // Called with every actor this agent spawns (its role and index): the simulator (tests/sim/)
  // uses it to know which actors a simulated node loses with its agent. Empty in `satrap`.
  std::function<void(const caf::actor&, const char* role, int32_t index)> on_spawn{};
};

node_agent_actor spawn_node_agent(caf::actor_system& sys, const node_agent_config& config);

}  // namespace satrap
