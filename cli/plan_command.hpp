// `satrap plan --manifest M --job J`: the placement of a job on a cluster, without running it.
#pragma once

#include "cli/job_options.hpp"

#include "cli/command.hpp"

#include <CLI/CLI.hpp>

namespace satrap {

class plan_command final : public command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  std::string manifest_file_;
  job_options job_;
};

}  // namespace satrap
