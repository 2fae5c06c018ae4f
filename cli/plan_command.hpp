// `satrap plan --manifest M --job J`: the placement of a job on a cluster, without running it.
#pragma once

#include "cli/job_options.hpp"

#include <CLI/CLI.hpp>

namespace satrap {

class plan_command {
 public:
  void add_to(CLI::App& app);
  bool parsed() const { return sub_ && sub_->parsed(); }
  int run();  // exit status

 private:
  CLI::App* sub_ = nullptr;
  std::string manifest_file_;
  job_options job_;
};

}  // namespace satrap
