// `satrap train`: one job, embedded in this process (every role an actor in one CAF system).
#pragma once

#include "actors/job_supervisor/job_supervisor.hpp"
#include "cli/job_options.hpp"

#include "cli/command.hpp"

#include <CLI/CLI.hpp>

#include <map>
#include <string>

namespace satrap {

class train_command final : public command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  bool json_ = false;
  bool print_spec_ = false;
  std::string log_level_ = "warn";
  int threads_ = 0;
  int status_port_ = 0;  // 0: no status endpoint
  std::string status_host_ = "127.0.0.1";
  job_options job_;     // --job and the job flags
  std::string export_;  // --export: the model folder written after the job
  uint32_t export_shards_ = 1;
  std::string export_dir_;  // --export-dir: each checkpoint's model, as the job trains
  int export_keep_ = 3;
  std::string test_scores_;  // --test-scores: the final evaluation's scores

  int write_test_scores(const std::string& path, const job_result& r);
  int export_final(const job_spec& spec, const job_result& r, const std::string& rows_dir);
};

}  // namespace satrap
