#include "cli/train_command.hpp"

#include "cli/exit_status.hpp"
#include "cli/progress_line.hpp"
#include "actors/embedded_job.hpp"
#include "cli/cluster_common.hpp"
#include "actors/admin/admin.hpp"
#include "cli/admin_http.hpp"
#include "actors/type_registry.hpp"
#include "serving/checkpoint_exporter.hpp"
#include "serving/model_export.hpp"
#include "models/embedding/embedding_snapshot.hpp"
#include "models/metrics.hpp"
#include "satrap_schemas/step.capnp.h"
#include "runtime/error.hpp"
#include "runtime/log.hpp"
#include "runtime/secrets.hpp"

#include <caf/scoped_actor.hpp>
#include <cblas.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>
#include <unistd.h>

namespace satrap {

void train_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand("train",
                            "Train one job embedded in this process, then evaluate it "
                            "on held-out data.\nWith no options: the default DLRM on the "
                            "default synthetic data (12.3M samples, about 40 s on 2 cores).");
  sub_->add_flag("--json", json_, "end with one JSON line of the results");
  sub_->add_flag("--print-spec", print_spec_, "print the effective job spec as YAML and exit");
  sub_->add_option("--log-level", log_level_, "trace, debug, info, warn, error or off")
    ->capture_default_str();
  sub_->add_option("--threads", threads_, "actor scheduler threads (0: one per core; at most 1024)")
    ->capture_default_str()
    ->check(CLI::Range(0, 1024));
  sub_
    ->add_option("--status-port", status_port_,
                 "serve the dashboard (/) and /status on this port while the job runs")
    ->check(CLI::Range(1, 65535));
  sub_
    ->add_option("--status-host", status_host_,
                 "address the status port binds (0.0.0.0: every interface)")
    ->capture_default_str();
  sub_->add_option("--export", export_,
                   "after the job: write the final model as a model folder "
                   "(for satrap predict / serve)");
  sub_
    ->add_option("--export-shards", export_shards_, "export shards (ranges of virtual partitions)")
    ->capture_default_str();
  sub_->add_option("--export-dir", export_dir_,
                   "while the job trains: export the model at each checkpoint into "
                   "DIR/<job>-step-<step> (for satrap serve --watch DIR); needs checkpoint.dir "
                   "and checkpoint.every_steps or every_seconds");
  sub_->add_option("--export-keep", export_keep_, "with --export-dir: the newest exports kept")
    ->capture_default_str()
    ->check(CLI::Range(1, 1000));
  sub_->add_option("--test-scores", test_scores_,
                   "write the final evaluation's score of every test row, one per line (several "
                   "labels: their scores on the line, tab-separated)");
  job_.add_to(*sub_, false);
}

namespace {

// One line, rewritten in place, while a terminal watches.
void show_progress(const job_progress& p) { print_progress_line(p); }

// Several tasks: {name: {test_auc, oracle_auc, test_logloss}}; null with one task.
nlohmann::json tasks_json(const job_result& r) {
  if (r.task_names.empty())
    return nullptr;
  nlohmann::json out = nlohmann::json::object();
  for (size_t t = 0; t < r.task_names.size() && t < r.task_test_auc.size(); ++t)
    out[r.task_names[t]] = {
      {"test_auc", r.task_test_auc[t]},
      {"oracle_auc",
       t < r.task_oracle_auc.size() ? nlohmann::json(r.task_oracle_auc[t]) : nlohmann::json()},
      {"test_logloss", r.task_test_logloss[t]}};
  return out;
}

// model.embedding.tier ssd: the shards' tier counters at the end, summed (null without the tier).
nlohmann::json tier_json(const job_spec& spec, const job_result& r) {
  if (spec.model.tier.kind != tier_kind::ssd)
    return nullptr;
  int64_t hits = 0, misses = 0, cold = 0, prefetched = 0, read = 0, written = 0, ram = 0;
  for (const auto& s : r.shards) {
    hits += s.tier_hits;
    misses += s.tier_misses;
    cold += s.tier_cold_hits;
    prefetched += s.tier_prefetch_hits;
    read += s.tier_bytes_read;
    written += s.tier_bytes_written;
    ram += s.tier_ram_bytes;
  }
  const int64_t asked = hits + misses;
  return {{"hits", hits},
          {"misses", misses},
          {"hit_rate", asked > 0 ? static_cast<double>(hits) / static_cast<double>(asked) : 0.0},
          {"cold_hits", cold},
          {"prefetch_hits", prefetched},
          {"bytes_read", read},
          {"bytes_written", written},
          {"ram_bytes", ram}};
}

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
  for (size_t t = 0; t < r.task_names.size() && t < r.task_test_auc.size(); ++t) {
    std::printf("test: task %s  auc %.4f", r.task_names[t].c_str(), r.task_test_auc[t]);
    if (t < r.task_oracle_auc.size())
      std::printf("  oracle auc %.4f  (gap %.4f)", r.task_oracle_auc[t],
                  r.task_oracle_auc[t] - r.task_test_auc[t]);
    std::printf("  logloss %.4f\n", r.task_test_logloss[t]);
  }
  if (!r.task_names.empty())
    std::printf("test: the figures above the tasks' are their means by training.task_weights\n");
  std::printf("test: ne %.4f  calibration %.4f", r.test_ne, r.test_calibration);
  if (!std::isnan(r.test_gauc))
    std::printf("  gauc %.4f (by slot %d)", r.test_gauc, spec.metrics.group_by);
  std::printf("\n");
  if (r.best_step >= 0)
    std::printf(
      "validation: best auc %.4f  logloss %.4f  at step %lld of %lld trained (%lld planned)%s%s, "
      "%zu evaluations\n",
      r.validation_auc, r.validation_logloss, static_cast<long long>(r.best_step),
      static_cast<long long>(r.steps), static_cast<long long>(r.steps_total),
      r.stop_reason.empty() ? "" : "; stopped: ", r.stop_reason.c_str(),
      r.validation_history.size());
  if (r.target_seconds >= 0)
    std::printf("target auc %.4f reached after %.1f s and %lld samples\n", spec.training.target_auc,
                r.target_seconds, static_cast<long long>(r.target_samples));
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
  const nlohmann::json tier = tier_json(spec, r);
  if (!tier.is_null())
    std::printf(
      "tier: hit rate %.4f  %lld misses  %lld rows from disk (%lld prefetched)  "
      "%.1f MiB read  %.1f MiB written  %.1f MiB of RAM (all shards)\n",
      tier["hit_rate"].get<double>(), tier["misses"].get<long long>(),
      tier["cold_hits"].get<long long>(), tier["prefetch_hits"].get<long long>(),
      tier["bytes_read"].get<double>() / 1048576.0, tier["bytes_written"].get<double>() / 1048576.0,
      tier["ram_bytes"].get<double>() / 1048576.0);
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
    {"tasks", tasks_json(r)},
    {"tier", tier},
  };
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
  j["test_ne"] = num(r.test_ne);
  j["test_calibration"] = num(r.test_calibration);
  j["test_gauc"] = num(r.test_gauc);
  j["steps"] = r.steps;
  j["steps_total"] = r.steps_total;
  nlohmann::json history = nlohmann::json::array();
  for (auto& h : r.validation_history)
    history.push_back(nlohmann::json::parse(h));
  j["validation_history"] = history;
  j["best_step"] = r.best_step >= 0 ? nlohmann::json(r.best_step) : nlohmann::json();
  j["validation_auc"] = r.best_step >= 0 ? num(r.validation_auc) : nlohmann::json();
  j["validation_logloss"] = r.best_step >= 0 ? num(r.validation_logloss) : nlohmann::json();
  j["validation_gauc"] = r.best_step >= 0 ? num(r.validation_gauc) : nlohmann::json();
  j["restored_validation_auc"] = num(r.restored_validation_auc);
  j["stop_reason"] = r.stop_reason.empty() ? nlohmann::json() : nlohmann::json(r.stop_reason);
  j["target_seconds"] = r.target_seconds >= 0 ? nlohmann::json(r.target_seconds) : nlohmann::json();
  j["target_samples"] = r.target_samples >= 0 ? nlohmann::json(r.target_samples) : nlohmann::json();
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

int train_command::write_test_scores(const std::string& path, const job_result& r) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::cerr << "satrap train: --test-scores: cannot write " << path << "\n";
    return 1;
  }
  // One line per test row; several tasks: their scores on the line, separated by tabs.
  const size_t tasks = r.task_names.empty() ? 1 : r.task_names.size();
  for (size_t i = 0; i < r.test_logits.size(); ++i)
    std::fprintf(f, "%.9g%c", static_cast<double>(sigmoid(r.test_logits[i])),
                 (i + 1) % tasks == 0 ? '\n' : '\t');
  std::fclose(f);
  return 0;
}

int train_command::export_final(const job_spec& spec, const job_result& r,
                                const std::string& rows_dir) {
  auto seqs = snapshot_list(rows_dir);
  if (r.params.empty() || seqs.empty()) {
    std::cerr << "satrap train: --export: the job left no final model\n";
    return 1;
  }
  payload_reader reader(r.params[0]);
  auto p = reader.root<schema::DenseParams>();
  auto params = data_view<float>(p.getValues());
  auto rows = export_model_folder(spec, params, p.getStep(), rows_dir, seqs.back(), export_,
                                  export_shards_, "");
  std::error_code ec;
  std::filesystem::remove_all(rows_dir, ec);
  if (!rows) {
    std::cerr << "satrap train: " << error_text(rows.error()) << "\n";
    return 1;
  }
  // stderr: with --json the last line of stdout stays the JSON object.
  std::fprintf(stderr, "exported the model (%llu embedding rows) to %s\n",
               static_cast<unsigned long long>(*rows), export_.c_str());
  return 0;
}

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
  std::string final_snapshot_dir;  // with --export: where the final model's rows go first
  if (!export_.empty()) {
    if (auto why = export_unsupported(spec); !why.empty()) {
      std::cerr << "satrap train: --export: " << why << "\n";
      return 2;
    }
    std::error_code ec;
    if (std::filesystem::exists(export_, ec) && !std::filesystem::is_empty(export_, ec)) {
      std::cerr << "satrap train: --export " << export_ << ": exists and is not empty\n";
      return 2;
    }
    // The final model's rows go to a scratch snapshot beside the export, removed afterwards.
    final_snapshot_dir =
      std::filesystem::absolute(export_).lexically_normal().string() + ".rows.tmp";
    std::filesystem::remove_all(final_snapshot_dir, ec);
  }
  bool tty = isatty(STDERR_FILENO) != 0;
  // The job runs under an admin of its own (actors/admin/admin.hpp, admin_embedded): its /status,
  // /metrics and dashboard are the head's. The page's controls need an admin token: the one in
  // SATRAP_ADMIN_TOKEN, else none (read-only).
  admin_config ac;
  ac.cluster = embedded_manifest();
  ac.version = satrap_version;
  auto* env_token = std::getenv("SATRAP_ADMIN_TOKEN");
  ac.token = env_token && *env_token ? env_token : random_token();
  ac.embedded.on = true;
  ac.embedded.read_only = !(env_token && *env_token);
  ac.embedded.configure = [dir = final_snapshot_dir](job_supervisor_config& c) {
    c.final_snapshot_dir = dir;
  };
  std::shared_ptr<checkpoint_exporter> exporter;  // shared: the progress callback may outlive run
  if (!export_dir_.empty()) {
    if (spec.checkpoint.dir.empty()
        || (spec.checkpoint.every_steps <= 0 && spec.checkpoint.every_seconds <= 0)) {
      std::cerr << "satrap train: --export-dir exports each checkpoint: give checkpoint.dir "
                   "(--checkpoint-dir) and checkpoint.every_steps (--checkpoint-every) or "
                   "checkpoint.every_seconds\n";
      return 2;
    }
    if (auto why = export_unsupported(spec); !why.empty()) {
      std::cerr << "satrap train: --export-dir: " << why << "\n";
      return 2;
    }
    checkpoint_exporter_options eo;
    eo.checkpoint_dir = spec.checkpoint.dir;
    eo.out_dir = export_dir_;
    eo.keep = export_keep_;
    eo.shards = export_shards_;
    exporter = std::make_shared<checkpoint_exporter>(spec, eo);
  }
  ac.embedded.on_progress =
    [tty, ex = exporter, seen = std::make_shared<std::atomic<int64_t>>(0)](const job_progress& p) {
      if (tty)
        show_progress(p);
      if (ex && p.checkpoints > seen->exchange(p.checkpoints))
        ex->checkpoint_written();
    };
  auto admin = spawn_admin(sys, ac);
  http_server http;
  if (status_port_ > 0) {
    auto why = http.start(status_host_, static_cast<uint16_t>(status_port_),
                          [&sys, admin, o = admin_http_options{ac.embedded.read_only}](
                            const http_request& req) { return admin_http(sys, admin, o, req); });
    if (!why.empty()) {
      std::cerr << "satrap train: --status-port " << status_port_ << ": " << why << "\n";
      caf::scoped_actor stopper{sys};
      stopper->send_exit(admin, caf::exit_reason::user_shutdown);
      return 1;
    }
    spdlog::info("status_endpoint url=http://{}:{}/", status_host_, status_port_);
    std::fprintf(stderr, "dashboard: http://%s:%d/\n", status_host_.c_str(), status_port_);
  }
  caf::scoped_actor self{sys};
  int exit_status = 0;
  self->request(admin, caf::infinite, run_atom::value, ac.token, job_spec_to_yaml(spec))
    .receive(
      [&](job_result& r) {
        if (tty)
          std::fprintf(stderr, "\n");
        print_result(spec, r, json_);
        if (!test_scores_.empty())
          exit_status = write_test_scores(test_scores_, r);
        if (exit_status == 0 && !export_.empty())
          exit_status = export_final(spec, r, final_snapshot_dir);
      },
      [&](caf::error& e) {
        if (tty)
          std::fprintf(stderr, "\n");
        std::cerr << "satrap train: job failed: " << error_text(e) << "\n";
        exit_status = exit_status_of(e);  // 2 when the job's input was wrong
      });
  if (exporter) {  // the newest checkpoint exported too, then the account
    bool newest = exporter->finish();
    std::fprintf(stderr, "exported %lld models to %s (newest: step %lld)\n",
                 static_cast<long long>(exporter->exported()), export_dir_.c_str(),
                 static_cast<long long>(exporter->last_step()));
    if (exporter->failures() > 0)
      std::fprintf(stderr, "%lld exports failed; the last: %s\n",
                   static_cast<long long>(exporter->failures()), exporter->last_error().c_str());
    if (!newest && exit_status == 0)
      exit_status = 1;
  }
  http.stop();
  self->send_exit(admin, caf::exit_reason::user_shutdown);
  return exit_status;
}

}  // namespace satrap
