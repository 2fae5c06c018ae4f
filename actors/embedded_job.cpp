#include "actors/embedded_job.hpp"

#include "actors/node_agent/node_agent.hpp"

namespace satrap {

job_supervisor_actor spawn_embedded_job(caf::actor_system& sys, job_supervisor_config config) {
  config.nodes = {spawn_node_agent(sys, {"local"})};
  config.node_names = {"local"};
  config.own_nodes = true;
  return spawn_job_supervisor(sys, config);
}

}  // namespace satrap
