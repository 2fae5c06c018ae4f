#include "engines/job_checkpoints.hpp"

#include <yaml-cpp/yaml.h>

namespace satrap {

std::string job_with_checkpoint_dir(const std::string& job_yaml, const std::string& base_dir,
                                    int every_seconds, const std::string& note) {
  YAML::Node job;
  try {
    job = YAML::Load(job_yaml);
  } catch (const YAML::Exception&) {
    return job_yaml;  // the command checked it; what is not YAML stays for submit to refuse
  }
  if (job.IsNull())
    job = YAML::Node(YAML::NodeType::Map);
  if (!job.IsMap())
    return job_yaml;
  auto checkpoint = job["checkpoint"];
  if (checkpoint.IsDefined() && !checkpoint.IsMap())
    return job_yaml;
  if (checkpoint.IsDefined() && checkpoint["dir"].IsDefined())
    return job_yaml;  // the job's own folder
  std::string name = "job";
  if (job["name"].IsDefined() && job["name"].IsScalar())
    name = job["name"].as<std::string>();
  if (name.empty() || name.find('/') != std::string::npos || name.front() == '.')
    name = "job";
  job["checkpoint"]["dir"] = base_dir + "/" + name;
  if (!job["checkpoint"]["every_steps"].IsDefined()
      && !job["checkpoint"]["every_seconds"].IsDefined())
    job["checkpoint"]["every_seconds"] = every_seconds;
  YAML::Emitter out;
  out << job;
  return "# " + note + "\n" + std::string(out.c_str()) + "\n";
}

}  // namespace satrap
