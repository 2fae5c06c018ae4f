// node_agent: spawns a job's role actors on its node, on request of the job's supervisor.
//
// Protocol: spawn(role, job_yaml, index, <the handles the role needs>) -> the new actor's handle.
// The job travels as its YAML text (job_spec_to_yaml): every node derives each role's config from
// the same spec (actors/job_supervisor/role_configs.hpp), so configs never cross the wire and a
// node running another satrap version refuses at registration rather than mid-job.
// In `satrap train` one agent runs in-process; in a cluster each `satrap node` runs one and
// publishes it on its port.
// Threading: an actor. Opening a job's data (loaders) may block once per job on this node.
#pragma once

#include "actors/dense_trainer/dense_trainer.hpp"
#include "runtime/atoms.hpp"

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <string>
#include <vector>

namespace satrap {

using node_agent_actor = caf::typed_actor<
  caf::replies_to<spawn_atom, shard_atom, std::string, int32_t>::with<embedding_shard_actor>,
  caf::replies_to<spawn_atom, aggregator_atom, std::string, int32_t,
                  std::vector<embedding_shard_actor>>::with<gradient_aggregator_actor>,
  caf::replies_to<spawn_atom, loader_atom, std::string, int32_t,
                  std::vector<gradient_aggregator_actor>>::with<data_loader_actor>,
  caf::replies_to<spawn_atom, trainer_atom, std::string, int32_t, std::vector<data_loader_actor>,
                  std::vector<gradient_aggregator_actor>,
                  progress_sink_actor>::with<dense_trainer_actor>>;

struct node_agent_config {
  std::string node = "local";  // this node's name, for logs
};

node_agent_actor spawn_node_agent(caf::actor_system& sys, const node_agent_config& config);

}  // namespace satrap
