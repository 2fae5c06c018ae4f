#include "cli/serving_commands.hpp"

#include "models/checkpoint/job_checkpoint.hpp"
#include "models/data/file_source.hpp"
#include "models/embedding/embedding_snapshot.hpp"
#include "models/metrics.hpp"
#include "models/serving/exported_model.hpp"
#include "runtime/error.hpp"
#include "spec/job_data.hpp"
#include "runtime/log.hpp"
#include "serving/batch_scoring.hpp"
#include "serving/model_export.hpp"
#include "serving/model_router.hpp"
#include "serving/model_server.hpp"
#include "cli/cli_timing.hpp"
#include "runtime/payload.hpp"
#include "satrap_schemas/step.capnp.h"

#include <cblas.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

namespace satrap {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.pop_back();
  return s;
}

}  // namespace

// ---- satrap export ------------------------------------------------------------------------------

void export_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand("export",
                            "Write a model folder for predict and serve from a job's "
                            "newest checkpoint.\nGive the job's spec (--job and the "
                            "flags it was trained with): the checkpoint holds no spec.");
  sub_->add_option("--checkpoint", checkpoint_, "the job's checkpoint folder (checkpoint.dir)")
    ->required()
    ->check(CLI::ExistingDirectory);
  sub_->add_option("--out", out_, "the model folder to write (new or empty)")->required();
  sub_->add_option("--version", version_, "the version name responses carry (default step-<step>)");
  sub_->add_option("--export-shards", shards_, "export shards (ranges of virtual partitions)")
    ->capture_default_str();
  job_.add_to(*sub_, false);
}

int export_command::run() {
  log_setup("warn");
  auto spec = job_.resolve();
  if (!spec) {
    std::cerr << "satrap export: " << error_text(spec.error()) << "\n";
    return 2;
  }
  auto latest = checkpoint_latest(checkpoint_);
  if (!latest) {
    std::cerr << "satrap export: " << error_text(make_error(latest.failure())) << "\n";
    return 2;
  }
  if (!*latest) {
    std::cerr << "satrap export: " << checkpoint_ << ": holds no complete checkpoint\n";
    return 2;
  }
  auto& meta = **latest;
  auto rows = export_checkpoint(*spec, checkpoint_, meta, out_, shards_, version_);
  if (!rows) {
    std::cerr << "satrap export: " << error_text(rows.error()) << "\n";
    return 1;
  }
  std::printf("exported %s (step %lld, %llu embedding rows) to %s\n", spec->name.c_str(),
              static_cast<long long>(meta.step), static_cast<unsigned long long>(*rows),
              out_.c_str());
  return 0;
}

// ---- satrap predict -----------------------------------------------------------------------------

void predict_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand("predict",
                            "Score data files with an exported model (the job's own "
                            "readers and hashing).\nWithout --data: the job's own "
                            "test split. With labels: AUC, logloss and NE.");
  sub_->add_option("--model", model_, "the model folder (satrap export / train --export)")
    ->required();
  sub_->add_option("--data", data_, "data files or globs (default: the job's test split)");
  sub_->add_option("--format", format_,
                   "criteo, libsvm or libffm (default: the job's data.source)");
  sub_->add_option(
    "--out", out_,
    "write one line per row: its label, then its score, tab-separated (several labels: every label, then every score, in the model's label order)");
  sub_->add_option("--instances", instances_,
                   "write every row as a serving request instance "
                   "(one JSON object per line)");
  sub_->add_option("--batch", batch_, "rows scored at once (default: the job's batch size)");
  sub_->add_flag("--json", json_, "end with one JSON line: auc, logloss, ne, rows, rows_per_sec");
  sub_->add_option("--log-level", log_level_, "trace, debug, info, warn, error or off")
    ->capture_default_str();
}

int predict_command::run() {
  if (!log_setup(log_level_)) {
    std::cerr << "satrap predict: --log-level: expected trace, debug, info, warn, error or off\n";
    return 2;
  }
  openblas_set_num_threads(1);
  auto model = exported_model::open(model_);
  if (!model) {
    std::cerr << "satrap predict: " << model.error() << "\n";
    return 2;
  }
  auto& m = *model.value();
  auto spec = job_spec_defaults();
  if (auto err = job_spec_load_text(m.meta().job_yaml, model_ + "/job.yaml", spec)) {
    std::cerr << "satrap predict: " << error_text(err) << "\n";
    return 2;
  }
  if (!format_.empty() && data_.empty()) {
    std::cerr << "satrap predict: --format needs --data\n";
    return 2;
  }
  if (!data_.empty()) {
    if (spec.data.source == data_source::synthetic && format_.empty()) {
      std::cerr << "satrap predict: the model was trained on synthetic data: give --format "
                   "(criteo, libsvm or libffm) with --data, or no --data for its test split\n";
      return 2;
    }
    if (!format_.empty()) {
      auto want = [&](const char* key, const std::string& v) -> bool {
        for (auto& f : job_fields())
          if (f.key == key) {
            auto e = f.set(spec, v);
            if (!e.empty()) {
              std::cerr << "satrap predict: --format: expected " << e << ", got '" << v << "'\n";
              return false;
            }
          }
        return true;
      };
      if (!want("data.source", format_))
        return 2;
    }
    // The files are both splits: converted once (the cache is reused), read as the test split.
    spec.data.train_files = data_;
    spec.data.test_files = data_;
    spec.training.test_batches = 0;
  }
  spec.training.train_batches = spec.placement.trainers;  // not trained: any valid count
  spec.data.crosses = m.meta().crosses;  // the rows are crossed as the model was trained
  if (auto err = job_spec_finalize(spec)) {
    std::cerr << "satrap predict: " << error_text(err) << "\n";
    return 2;
  }
  if (job_data_slots(spec.data) != m.slots()
      || job_data_dense_features(spec.data) != m.dense_features()) {
    std::cerr << "satrap predict: the data has " << job_data_slots(spec.data) << " slots and "
              << job_data_dense_features(spec.data) << " dense features, the model " << m.slots()
              << " and " << m.dense_features() << "\n";
    return 2;
  }
  auto data = job_data_open(spec);
  if (!data) {
    std::cerr << "satrap predict: " << error_text(data.error()) << "\n";
    return 2;
  }
  if (!instances_.empty() && m.named()) {
    std::cerr << "satrap predict: --instances writes requests by slot number; a model with named "
                 "features is asked with its data's own JSON objects (send the JSON lines "
                 "themselves as instances, README \"Serving\")\n";
    return 2;
  }
  std::FILE* out = nullptr;
  if (!out_.empty() && !(out = std::fopen(out_.c_str(), "w"))) {
    std::cerr << "satrap predict: cannot write " << out_ << "\n";
    return 2;
  }
  std::FILE* inst = nullptr;
  if (!instances_.empty() && !(inst = std::fopen(instances_.c_str(), "w"))) {
    std::cerr << "satrap predict: cannot write " << instances_ << "\n";
    return 2;
  }
  auto scored = score_test_split(
    model.value(), spec, *data, batch_, [&](const batch& b, int i, const float* logits) {
      if (out) {  // the labels, then the predictions, one per task
        for (int t = 0; t < b.tasks; ++t)
          std::fprintf(out, "%g\t", b.labels[static_cast<size_t>(i) * b.tasks + t]);
        for (int t = 0; t < b.tasks; ++t)
          std::fprintf(out, "%.9g%c", static_cast<double>(sigmoid(logits[t])),
                       t + 1 < b.tasks ? '\t' : '\n');
      }
      if (inst) {
        nlohmann::json slots = nlohmann::json::array(), weights = nlohmann::json::array();
        for (int s = 0; s < m.input_slots(); ++s) {  // serving adds the crosses itself
          auto bag = static_cast<size_t>(i) * b.slots + s;
          slots.push_back(std::vector<uint64_t>(b.ids.begin() + b.offsets[bag],
                                                b.ids.begin() + b.offsets[bag + 1]));
          if (!b.weights.empty())
            weights.push_back(std::vector<float>(b.weights.begin() + b.offsets[bag],
                                                 b.weights.begin() + b.offsets[bag + 1]));
        }
        nlohmann::json x = {
          {"dense", std::vector<float>(b.dense.begin() + i * b.dense_features,
                                       b.dense.begin() + (i + 1) * b.dense_features)},
          {"slots", slots}};
        if (m.meta().value_weights)
          x["weights"] = weights;
        std::fprintf(inst, "%s\n", x.dump().c_str());
      }
    });
  if (out)
    std::fclose(out);
  if (inst)
    std::fclose(inst);
  if (!scored) {
    std::cerr << "satrap predict: " << error_text(scored.error()) << "\n";
    return 1;
  }
  auto rows = scored->rows;
  auto secs = scored->seconds, rps = scored->rows_per_sec;
  auto auc = scored->auc, logloss = scored->logloss, ne = scored->ne;
  std::printf("model %s version %s: %lld rows in %.2f s (%.0f rows/s)\n", m.meta().name.c_str(),
              m.meta().version.c_str(), static_cast<long long>(rows), secs, rps);
  const auto& labels = m.meta().labels;
  if (scored->tasks.size() > 1) {
    for (size_t t = 0; t < scored->tasks.size(); ++t)
      std::printf("%s: auc %.6f  logloss %.6f  ne %.6f\n",
                  t < labels.size() ? labels[t].c_str() : "?", scored->tasks[t].auc,
                  scored->tasks[t].logloss, scored->tasks[t].ne);
  } else {
    std::printf("auc %.6f  logloss %.6f  ne %.6f\n", auc, logloss, ne);
  }
  if (json_) {
    auto num = [](double x) { return std::isnan(x) ? nlohmann::json() : nlohmann::json(x); };
    nlohmann::json j = {{"model", m.meta().name}, {"version", m.meta().version},
                        {"auc", num(auc)},        {"logloss", num(logloss)},
                        {"ne", num(ne)},          {"rows", rows},
                        {"rows_per_sec", rps}};
    if (scored->tasks.size() > 1) {  // auc, logloss and ne above are the first task's
      auto tasks = nlohmann::json::array();
      for (size_t t = 0; t < scored->tasks.size(); ++t)
        tasks.push_back({{"label", t < labels.size() ? labels[t] : ""},
                         {"auc", num(scored->tasks[t].auc)},
                         {"logloss", num(scored->tasks[t].logloss)},
                         {"ne", num(scored->tasks[t].ne)}});
      j["tasks"] = tasks;
    }
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

// ---- satrap serve -------------------------------------------------------------------------------

void serve_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand("serve",
                            "Answer prediction requests over HTTP/JSON with an exported "
                            "model:\nPOST /v1/models/<name>:predict "
                            "{\"instances\": [{\"dense\": [...], \"slots\": [[ids...], ...]}]}");
  auto* model = sub_->add_option("--model", model_, "the model folder to serve");
  auto* watch = sub_->add_option("--watch", watch_,
                                 "a folder of model folders: serve the newest, "
                                 "reload when a newer one appears");
  model->excludes(watch);
  sub_->add_option("--host", host_, "address to bind")->capture_default_str();
  sub_->add_option("--port", port_, "port to bind")->capture_default_str();
  sub_->add_option("--grpc-port", grpc_port_,
                   "also serve KServe v2 over gRPC (inference.GRPCInferenceService) on this "
                   "port (default: no gRPC)");
  sub_->add_option("--threads", threads_, "scoring threads (0: one per core; at most 1024)")
    ->capture_default_str()
    ->check(CLI::Range(0, 1024));
  sub_->add_option("--http-threads", http_threads_, "connections served at once (at most 4096)")
    ->capture_default_str()
    ->check(CLI::Range(1, 4096));
  sub_->add_option("--max-batch", max_batch_, "instances scored together at most")
    ->capture_default_str();
  sub_
    ->add_option("--max-queue-delay-ms", max_delay_ms_,
                 "wait at most this long for more requests to batch")
    ->capture_default_str();
  sub_->add_option("--watch-interval", watch_s_, "seconds between looks at --watch")
    ->capture_default_str();
  sub_->add_option("--max-body-mb", max_body_mb_, "larger request bodies get 413")
    ->capture_default_str();
  sub_
    ->add_option("--shards", shards_,
                 "a fleet's partition server: hold only these export shards (e.g. 0,2; "
                 "satrap route answers in front)")
    ->delimiter(',');
  sub_
    ->add_option("--admin-token-file", token_file_,
                 "a file holding the token that POST /admin/reload needs")
    ->check(CLI::ExistingFile);
  sub_->add_option("--log-level", log_level_, "trace, debug, info, warn, error or off")
    ->capture_default_str();
}

namespace {
std::atomic<bool> serve_stop{false};
void on_signal(int) { serve_stop = true; }
}  // namespace

int serve_command::run() {
  if (!log_setup(log_level_)) {
    std::cerr << "satrap serve: --log-level: expected trace, debug, info, warn, error or off\n";
    return 2;
  }
  if (model_.empty() && watch_.empty()) {
    std::cerr << "satrap serve: give --model FOLDER or --watch FOLDER\n";
    return 2;
  }
  if (max_batch_ < 1 || max_delay_ms_ < 0 || watch_s_ <= 0 || max_body_mb_ < 1) {
    std::cerr << "satrap serve: --max-batch, --watch-interval and --max-body-mb must be positive\n";
    return 2;
  }
  openblas_set_num_threads(1);
  model_server_options o;
  o.model_dir = model_;
  o.watch_dir = watch_;
  o.shards = shards_;
  o.host = host_;
  o.port = port_;
  o.grpc_port = grpc_port_;
  o.workers = threads_;
  o.http_threads = http_threads_;
  o.max_batch = max_batch_;
  o.max_queue_delay = std::chrono::microseconds(static_cast<int64_t>(max_delay_ms_ * 1000));
  o.watch_interval = std::chrono::milliseconds(static_cast<int64_t>(watch_s_ * 1000));
  o.max_body_bytes = max_body_mb_ << 20;
  if (!token_file_.empty()) {
    std::ifstream in(token_file_);
    std::getline(in, o.admin_token);
    o.admin_token = trim(o.admin_token);
    if (o.admin_token.empty()) {
      std::cerr << "satrap serve: " << token_file_ << ": empty admin token\n";
      return 2;
    }
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  model_server server;
  if (auto err = server.start(o); !err.empty()) {
    std::cerr << "satrap serve: " << err << "\n";
    return 2;
  }
  std::printf("serving %s on http://%s:%u\n", server.version().c_str(), host_.c_str(), port_);
  if (grpc_port_ != 0)
    std::printf("serving KServe v2 over gRPC on %s:%u\n", host_.c_str(), grpc_port_);
  std::fflush(stdout);
  while (!serve_stop)
    std::this_thread::sleep_for(ms(cli_timing::serve_poll_ms));
  server.stop();
  return 0;
}

// ---- satrap route -------------------------------------------------------------------------------

void route_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand(
    "route",
    "A fleet's router: answer POST /v1/models/<name>:predict for a model split over partition "
    "servers (satrap serve --model M --shards K), looking each id up at the server of its "
    "partition and running the dense network here");
  sub_->add_option("--model", model_, "the model folder (the servers' own)")->required();
  sub_->add_option("--servers", servers_, "the partition servers, host:port,...")
    ->required()
    ->delimiter(',');
  sub_->add_option("--host", host_, "address to bind")->capture_default_str();
  sub_->add_option("--port", port_, "port to bind")->capture_default_str();
  sub_->add_option("--http-threads", http_threads_, "connections served at once (at most 4096)")
    ->capture_default_str()
    ->check(CLI::Range(1, 4096));
  sub_->add_option("--max-body-mb", max_body_mb_, "larger request bodies get 413")
    ->capture_default_str();
  sub_
    ->add_option("--timeout-ms", timeout_ms_,
                 "a partition server's answer, at most (then the request gets 503)")
    ->capture_default_str()
    ->check(CLI::Range(1, 600000));
  sub_->add_option("--log-level", log_level_, "trace, debug, info, warn, error or off")
    ->capture_default_str();
}

int route_command::run() {
  if (!log_setup(log_level_)) {
    std::cerr << "satrap route: --log-level: expected trace, debug, info, warn, error or off\n";
    return 2;
  }
  openblas_set_num_threads(1);
  model_router_options o;
  o.model_dir = model_;
  o.servers = servers_;
  o.host = host_;
  o.port = port_;
  o.http_threads = http_threads_;
  o.max_body_bytes = max_body_mb_ << 20;
  o.timeout = std::chrono::milliseconds(timeout_ms_);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  model_router router;
  if (auto err = router.start(o); !err.empty()) {
    std::cerr << "satrap route: " << err << "\n";
    return 2;
  }
  std::printf("routing %s over %zu partition servers on http://%s:%u\n", router.version().c_str(),
              servers_.size(), host_.c_str(), port_);
  std::fflush(stdout);
  while (!serve_stop)
    std::this_thread::sleep_for(ms(cli_timing::serve_poll_ms));
  router.stop();
  return 0;
}

}  // namespace satrap
