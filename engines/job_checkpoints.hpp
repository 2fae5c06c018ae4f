// The job file a launcher submits, with the cluster's shared storage as its default checkpoint
// folder: a job without checkpoint.dir gets <base_dir>/<its name, else "job"> and, without a
// schedule (every_steps, every_seconds), a checkpoint every `every_seconds`; a first comment
// line `note` says so. A job with its own folder, and text that is not a YAML map (submit
// refuses it), stay as they are.
// Threading: pure function.
#pragma once

#include <string>

namespace satrap {

std::string job_with_checkpoint_dir(const std::string& job_yaml, const std::string& base_dir,
                                    int every_seconds, const std::string& note);

}  // namespace satrap
