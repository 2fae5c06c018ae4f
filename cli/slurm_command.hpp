// `satrap slurm --manifest M [--job FILE]`: prints the batch script that runs the manifest's
// cluster as one heterogeneous Slurm job and submits the job file inside it
// (engines/slurm_script.hpp): `satrap slurm --manifest M --job J > run.sh && sbatch run.sh`.
#pragma once

#include "cli/command.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace satrap {

class slurm_command final : public command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  std::string manifest_file_;
  std::string job_file_;
  std::string satrap_;
  std::string state_dir_;
  std::string time_;
  std::string partition_;
  int signal_s_ = 120;
  int max_restarts_ = 5;
  std::string output_;
};

}  // namespace satrap
