// The subcommand table of the cluster commands: their flags, and which one runs.
#include "cli/cluster_commands.hpp"

#include "runtime/log.hpp"

#include <iostream>

namespace satrap {

void cluster_commands::add_to(CLI::App& app) {
  auto shared = [this](CLI::App* sub) {
    sub->add_option("--manifest", manifest_file_,
                    "node manifest (default: $SATRAP_MANIFEST, else "
                    "the last `satrap up` here)");
    sub->add_option("--state-dir", state_dir_,
                    "logs, pid files, token, job table "
                    "(default .satrap/<cluster>)");
    sub->add_option("--token-file", token_file_,
                    "admin token (default: $SATRAP_ADMIN_TOKEN, "
                    "else <state dir>/admin.token)");
    sub->add_option("--log-level", log_level_, "trace, debug, info, warn, error or off")
      ->capture_default_str();
    sub->add_option("--log-file", log_file_,
                    "log into FILE, rotated by size, instead of stderr (`satrap up` gives each "
                    "process <state dir>/<name>.log)");
    sub
      ->add_option("--log-max-mb", log_max_mb_,
                   "with --log-file (and for what `up` starts): a log file rotates at this "
                   "size, MiB")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
    sub
      ->add_option("--log-files", log_files_,
                   "with --log-file: files kept, the current one included (NAME.log, "
                   "NAME.1.log, ...)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1000}));
  };
  head_ = app.add_subcommand("head",
                             "Run the head of a cluster: admin actor, node registry, "
                             "job table, HTTP status endpoint (/status /metrics /healthz "
                             "/readyz). Runs until SIGINT or SIGTERM.");
  shared(head_);
  node_ = app.add_subcommand("node",
                             "Run one node of a cluster: joins the head, spawns role "
                             "actors on request, sends heartbeats.");
  shared(node_);
  node_->add_option("--name", node_name_,
                    "this node's name in the manifest (required, except in `satrap slurm`'s "
                    "batch job, where Slurm's environment names it)");
  node_->add_option("--wait", wait_s_, "seconds to keep trying to reach the head")
    ->capture_default_str();
  node_->add_option("--starts-file", starts_file_,
                    "count this node's starts in FILE and report the restarts to the head (for "
                    "containers restarted by their runtime; `satrap supervise` sets "
                    "$SATRAP_NODE_RESTARTS instead)");
  head_->add_option("--listen", listen_,
                    "address the status endpoint binds (default: the "
                    "manifest's head host; 0.0.0.0 in a container)");
  supervise_ = app.add_subcommand(
    "supervise",
    "Run this host's nodes and restart one whose process exits, with backoff and a "
    "restart intensity (at most --max-restarts within --period); past it, give up "
    "on that node and tell the head. `satrap up` starts it; `satrap down` stops it "
    "first, and it stops its nodes.");
  shared(supervise_);
  supervise_->add_option("--max-restarts", max_restarts_, "restarts allowed within --period")
    ->capture_default_str()
    ->check(CLI::Range(0, 1000));
  supervise_->add_option("--period", period_s_, "seconds of the restart intensity window")
    ->capture_default_str()
    ->check(CLI::Range(1, 86400));
  supervise_
    ->add_option("--backoff-ms", backoff_ms_,
                 "delay before the first restart, doubled for "
                 "each restart within the period")
    ->capture_default_str()
    ->check(CLI::Range(0, 600000));
  supervise_->add_option("--backoff-max-ms", backoff_max_ms_, "largest delay before a restart")
    ->capture_default_str()
    ->check(CLI::Range(0, 600000));
  up_ = app.add_subcommand("up",
                           "Start the head and every node whose host is this machine, in "
                           "the background (logs and pid files in the state dir); wait "
                           "until every node has joined.");
  shared(up_);
  up_->add_option("--wait", wait_s_, "seconds to wait for the cluster to be ready")
    ->capture_default_str();
  down_ = app.add_subcommand("down", "Stop every process `satrap up` started for the cluster.");
  shared(down_);
  submit_ = app.add_subcommand("submit", "Submit a job file to the cluster; prints its id.");
  shared(submit_);
  submit_->add_option("job", job_file_, "job file (YAML)")->required()->check(CLI::ExistingFile);
  submit_->add_flag("--follow", follow_,
                    "show progress until the job ends; exit status 0 only "
                    "when it SUCCEEDED");
  submit_->add_flag("--json", json_, "with --follow: end with the job's record as one JSON line");
  submit_->add_option("--resume", resume_dir_,
                      "continue from the newest checkpoint in this "
                      "directory (a job's checkpoint.dir)");
  jobs_ = app.add_subcommand("jobs", "List the cluster's jobs.");
  shared(jobs_);
  jobs_->add_flag("--json", json_, "one JSON object per job");
  cancel_ = app.add_subcommand("cancel", "Cancel a pending or running job.");
  shared(cancel_);
  cancel_->add_option("id", job_id_, "job id (see satrap jobs)")->required();
  status_ = app.add_subcommand("status", "Nodes, actors and jobs of the cluster.");
  shared(status_);
  status_->add_flag("--json", json_, "the head's /status document");
  checkpoint_ = app.add_subcommand("checkpoint",
                                   "Take a consistent checkpoint of a running job "
                                   "now (into its checkpoint.dir); prints its step.");
  shared(checkpoint_);
  checkpoint_->add_option("id", job_id_, "job id (see satrap jobs)")->required();
}

bool cluster_commands::parsed() const {
  return head_
         && (head_->parsed() || node_->parsed() || up_->parsed() || down_->parsed()
             || submit_->parsed() || jobs_->parsed() || cancel_->parsed() || status_->parsed()
             || checkpoint_->parsed() || supervise_->parsed());
}

std::vector<std::string> cluster_commands::log_args(const std::string& file) const {
  return {"--log-level",  log_level_,
          "--log-file",   file,
          "--log-max-mb", std::to_string(log_max_mb_),
          "--log-files",  std::to_string(log_files_)};
}

int cluster_commands::run() {
  if (!log_file_.empty()) {
    if (auto why = log_setup(log_level_, log_file_, {log_max_mb_ << 20, log_files_});
        !why.empty()) {
      std::cerr << "satrap: --log-file: " << why << "\n";
      return 2;
    }
  } else if (!log_setup(log_level_)) {
    std::cerr << "satrap: --log-level: expected trace, debug, info, warn, error or off\n";
    return 2;
  }
  if (head_->parsed())
    return run_head();
  if (node_->parsed())
    return run_node();
  if (up_->parsed())
    return run_up();
  if (down_->parsed())
    return run_down();
  if (submit_->parsed())
    return run_submit();
  if (jobs_->parsed())
    return run_jobs();
  if (cancel_->parsed())
    return run_cancel();
  if (checkpoint_->parsed())
    return run_checkpoint();
  if (supervise_->parsed())
    return run_supervise();
  return run_status();
}

}  // namespace satrap
