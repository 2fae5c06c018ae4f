// The cluster subcommands: head, node, up, down, supervise (processes) and submit, jobs, cancel,
// status (clients of the head's admin actor).
//
// Which cluster: --manifest, else $SATRAP_MANIFEST, else $SATRAP_MANIFEST_YAML (the manifest's
// text, as in containers), else the manifest of the last `satrap up` in this directory
// (.satrap/current). The admin token: --token-file, else $SATRAP_ADMIN_TOKEN,
// else <state dir>/admin.token (written by `satrap up`). The state dir (logs, pid files, token,
// the head's job table) is --state-dir, else .satrap/<cluster>.
#pragma once

#include "cli/command.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace satrap {

class cluster_commands final : public command {
 public:
  void add_to(CLI::App& app) override;
  bool parsed() const override;  // one of the group's subcommands
  int run() override;            // the parsed subcommand's exit status

 private:
  // Shared options.
  std::string manifest_file_;
  std::string state_dir_;
  std::string token_file_;
  std::string log_level_ = "info";
  std::string log_file_;  // "": stderr; else rotated (runtime/log.hpp), as `satrap up` does
  uint64_t log_max_mb_ = 64;
  size_t log_files_ = 5;
  // The log flags a process that `up` or `supervise` starts gets, logging to `file`.
  std::vector<std::string> log_args(const std::string& file) const;
  // Per command.
  std::string node_name_;
  std::string job_file_;
  std::string job_id_;
  std::string resume_dir_;
  bool follow_ = false;
  bool json_ = false;
  int wait_s_ = 60;
  std::string listen_;       // head: the status endpoint's bind address
  std::string starts_file_;  // node: counts its starts (in a container's volume)
  // supervise: restart intensity (at most max_restarts_ within period_s_) and backoff.
  int max_restarts_ = 5;
  int period_s_ = 60;
  int backoff_ms_ = 250;
  int backoff_max_ms_ = 4000;
  CLI::App* head_ = nullptr;
  CLI::App* node_ = nullptr;
  CLI::App* up_ = nullptr;
  CLI::App* down_ = nullptr;
  CLI::App* submit_ = nullptr;
  CLI::App* jobs_ = nullptr;
  CLI::App* cancel_ = nullptr;
  CLI::App* status_ = nullptr;
  CLI::App* checkpoint_ = nullptr;
  CLI::App* supervise_ = nullptr;

  int run_head();
  int run_node();
  int run_up();
  int run_down();
  int run_submit();
  int run_jobs();
  int run_cancel();
  int run_status();
  int run_checkpoint();
  int run_supervise();  // cluster_supervisor.cpp
};

}  // namespace satrap
