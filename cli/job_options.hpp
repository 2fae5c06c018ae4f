// The job options every job-taking subcommand shares: --job FILE and one flag per job key
// (job_fields), resolved as defaults <- file <- flags, then finalised.
#pragma once

#include "spec/job_spec.hpp"

#include <CLI/CLI.hpp>
#include <caf/expected.hpp>

#include <map>
#include <string>
#include <vector>

namespace satrap {

class job_options {
 public:
  // Adds the options to `app`; `job_required` makes --job mandatory.
  void add_to(CLI::App& app, bool job_required);
  // The effective, finalised spec; errors are ready to print.
  caf::expected<job_spec> resolve() const;
  const std::string& job_file() const { return job_file_; }

 private:
  std::string job_file_;
  std::map<std::string, std::string> values_;                 // job key -> flag text
  std::map<std::string, std::vector<std::string>> repeated_;  // nested job key -> one text per use
  std::map<std::string, CLI::Option*> options_;
};

}  // namespace satrap
