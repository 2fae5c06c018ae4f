#include "cli/train_command.hpp"

#include "cli/progress_line.hpp"
#include "actors/embedded_job.hpp"
#include "actors/type_registry.hpp"
#include "runtime/error.hpp"
#include "runtime/log.hpp"

#include <caf/scoped_actor.hpp>
#include <cblas.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <thread>
#include <unistd.h>

namespace satrap {

void train_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand("train", "Train one job embedded in this process, then evaluate it "
                                     "on held-out data.\nWith no options: the default DLRM on the "
                                     "default synthetic data (10M samples, about 30 s on 2 cores).");
  sub_->add_flag("--json", json_, "end with one JSON line of the results");
  sub_->add_flag("--print-spec", print_spec_, "print the effective job spec as YAML and exit");
  sub_->add_option("--log-level", log_level_, "trace, debug, info, warn, error or off")
    ->capture_default_str();
  sub_->add_option("--threads", threads_, "actor scheduler threads (0: one per core)")
    ->capture_default_str();
  job_.add_to(*sub_, false);
}

namespace {

// One line, rewritten in place, while a terminal watches.
void show_progress(const job_progress& p) { print_progress_line(p); }

void print_result(const job_spec& spec, const job_result& r, bool json) {
  std::printf("job %s: %lld training samples in %.1f s (%.0f samples/s), %lld embedding rows\n",
              spec.name.c_str(), static_cast<long long>(r.samples), r.train_seconds,
              r.samples_per_sec, static_cast<long long>(r.embedding_rows));
  if (std::isnan(r.oracle_auc))  // real data: no teacher, so no oracle
    std::printf("test: auc %.4f  oracle auc n/a  logloss %.4f  on %lld samples\n", r.test_auc,
                r.test_logloss, static_cast<long long>(r.test_samples));
  else
    std::printf("test: auc %.4f  oracle auc %.4f  (gap %.4f)  logloss %.4f  on %lld samples\n",
                r.test_auc, r.oracle_auc, r.oracle_auc - r.test_auc, r.test_logloss,
                static_cast<long long>(r.test_samples));
  if (!r.data_skipped.empty()) {
    int64_t total = 0;
    std::string reasons;
    for (auto& [reason, count] : r.data_skipped) {
      total += count;
      reasons += " " + reason + "=" + std::to_string(count);
    }
    std::printf("data: %lld bad input lines skipped:%s\n", static_cast<long long>(total),
                reasons.c_str());
  }
  if (r.checkpoints > 0 || r.restarts > 0)
    std::printf("supervision: %lld checkpoints, %lld restarts, %lld batches replayed\n",
                static_cast<long long>(r.checkpoints), static_cast<long long>(r.restarts),
                static_cast<long long>(r.batches_replayed));
  if (!json)
    return;
  nlohmann::json j = {
    {"job", spec.name},
    {"test_auc", r.test_auc},
    {"oracle_auc", std::isnan(r.oracle_auc) ? nlohmann::json() : nlohmann::json(r.oracle_auc)},
    {"test_logloss", r.test_logloss},
    {"samples", r.samples},
    {"test_samples", r.test_samples},
    {"train_seconds", r.train_seconds},
    {"samples_per_sec", r.samples_per_sec},
    {"final_train_loss", r.step_losses.empty() ? 0.0 : r.step_losses.back()},
    {"embedding_rows", r.embedding_rows},
    {"staleness", spec.training.staleness},
    {"trainers", spec.placement.trainers},
    {"shards", spec.placement.shards},
    {"data_skipped", r.data_skipped},
    {"checkpoints", r.checkpoints},
    {"restarts", r.restarts},
    {"batches_replayed", r.batches_replayed},
    {"gradients_lost", r.gradients_lost},
  };
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

int train_command::run() {
  if (!log_setup(log_level_)) {
    std::cerr << "satrap train: --log-level: expected trace, debug, info, warn, error or off, got '"
              << log_level_ << "'\n";
    return 2;
  }
  auto resolved = job_.resolve();
  if (!resolved) {
    std::cerr << "satrap train: " << error_text(resolved.error()) << "\n";
    return 2;
  }
  auto spec = std::move(*resolved);
  if (print_spec_) {
    std::cout << job_spec_to_yaml(spec);
    return 0;
  }
  // The actors are the parallelism; BLAS inside one actor must not spawn threads of its own.
  openblas_set_num_threads(1);
  satrap_config cfg;
  auto threads = threads_ > 0 ? threads_ : static_cast<int>(std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", std::max(threads, 1));
  caf::actor_system sys{cfg};
  job_supervisor_config jc;
  jc.spec = spec;
  bool tty = isatty(STDERR_FILENO) != 0;
  if (tty)
    jc.observer = show_progress;
  auto sup = spawn_embedded_job(sys, jc);
  caf::scoped_actor self{sys};
  int status = 0;
  self->request(sup, caf::infinite, run_atom::value)
    .receive(
      [&](job_result& r) {
        if (tty)
          std::fprintf(stderr, "\n");
        print_result(spec, r, json_);
      },
      [&](caf::error& e) {
        if (tty)
          std::fprintf(stderr, "\n");
        std::cerr << "satrap train: job failed: " << error_text(e) << "\n";
        status = 1;
      });
  self->send_exit(sup, caf::exit_reason::user_shutdown);
  return status;
}

}  // namespace satrap
