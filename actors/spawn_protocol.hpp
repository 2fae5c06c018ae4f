// The protocol by which a job supervisor has a node spawn its role actors: the typed handle of a
// node agent (actors/node_agent/ implements it), kept apart so that the supervisor and the admin
// depend on the protocol, not on the agent.
//   spawn(role, job_yaml, index, <the handles the role needs>) -> the new actor's handle.
// The job travels as its YAML text; every node derives each role's config from it.
//   head(node_id): from the agent's own process only (node_link): the head's process, the only
//   remote process whose spawn requests the agent obeys.
#pragma once

#include "actors/dense_trainer/dense_trainer.hpp"
#include "runtime/atoms.hpp"

#include <caf/node_id.hpp>
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
                  progress_sink_actor>::with<dense_trainer_actor>,
  caf::reacts_to<head_atom, caf::node_id>>;

}  // namespace satrap
