#include "cli/serving_commands.hpp"

#include "models/checkpoint/job_checkpoint.hpp"
#include "models/data/file_source.hpp"
#include "models/embedding/embedding_snapshot.hpp"
#include "models/metrics.hpp"
#include "models/serving/exported_model.hpp"
#include "runtime/error.hpp"
#include "spec/job_data.hpp"
#include "runtime/log.hpp"
#include "serving/model_server.hpp"
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

caf::expected<uint64_t> export_model_folder(const job_spec& spec, std::span<const float> params,
                                            int64_t step, const std::string& snapshot_root,
                                            uint64_t sequence, const std::string& out,
                                            uint32_t shards, const std::string& version) {
  exported_model_meta meta;
  meta.name = spec.name;
  meta.version = version.empty() ? "step-" + std::to_string(step) : version;
  meta.step = step;
  meta.created_ns = static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now().time_since_epoch())
      .count());
  meta.network = spec.model.network;
  meta.pool = spec.model.pool;
  meta.embedding = spec.model.embedding;
  meta.partitions = static_cast<uint32_t>(spec.placement.partitions);
  meta.crosses = spec.data.crosses;
  meta.job_yaml = job_spec_to_yaml(spec);
  auto rows = export_model(out, meta, params, snapshot_root, sequence, shards);
  if (!rows)
    return make_error(errc::io_failure, "export: " + rows.error());
  return rows.value();
}

// ---- satrap export ------------------------------------------------------------------------------

void export_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand("export", "Write a model folder for predict and serve from a job's "
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
  auto dense = checkpoint_read_dense(checkpoint_, meta);
  if (!dense) {
    std::cerr << "satrap export: " << error_text(make_error(dense.failure())) << "\n";
    return 1;
  }
  capnp_payload state{payload_bytes(dense->begin(), dense->end())};
  payload_reader reader(state);
  auto params = data_view<float>(reader.root<schema::DenseState>().getParams());
  auto rows = export_model_folder(*spec, params, meta.step, checkpoint_embedding_root(checkpoint_),
                                  meta.embedding_sequence, out_, shards_, version_);
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
  sub_ = app.add_subcommand("predict", "Score data files with an exported model (the job's own "
                                       "readers and hashing).\nWithout --data: the job's own "
                                       "test split. With labels: AUC, logloss and NE.");
  sub_->add_option("--model", model_, "the model folder (satrap export / train --export)")
    ->required();
  sub_->add_option("--data", data_, "data files or globs (default: the job's test split)");
  sub_->add_option("--format", format_, "criteo, libsvm or libffm (default: the job's data.source)");
  sub_->add_option("--out", out_, "write one line per row: label, score (tab-separated)");
  sub_->add_option("--instances", instances_, "write every row as a serving request instance "
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
              << job_data_dense_features(spec.data) << " dense features, the model "
              << m.slots() << " and " << m.dense_features() << "\n";
    return 2;
  }
  auto data = job_data_open(spec);
  if (!data) {
    std::cerr << "satrap predict: " << error_text(data.error()) << "\n";
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
  const int bs = batch_ > 0 ? batch_ : spec.training.batch_size;
  model_scorer scorer(model.value());
  std::vector<float> logits, labels, all_logits;
  auto started = std::chrono::steady_clock::now();
  int64_t rows = 0;
  // Test batches of the job's batch size, as the trainers evaluated them; regrouped by --batch.
  const int jbs = spec.training.batch_size;
  int64_t total = data->source->samples(data_split::test);
  int64_t want = data->test_batches * int64_t{jbs};
  if (total >= 0)
    want = std::min(want, total);
  for (int64_t first = 0; first < want; first += bs) {
    auto n = static_cast<int>(std::min<int64_t>(bs, want - first));
    batch b;
    if (bs == jbs) {
      b = data->source->make_batch(data_split::test, first / jbs, jbs);
    } else {  // gather rows [first, first + n) from the job's batches
      b.slots = m.slots();
      b.dense_features = m.dense_features();
      b.offsets.push_back(0);
      for (int64_t k = first / jbs; k * jbs < first + n; ++k) {
        auto jb = data->source->make_batch(data_split::test, k, jbs);
        for (int i = 0; i < jb.size; ++i) {
          auto row = k * jbs + i;
          if (row < first || row >= first + n)
            continue;
          for (int s = 0; s < jb.slots; ++s) {
            auto bag = static_cast<size_t>(i) * jb.slots + s;
            b.ids.insert(b.ids.end(), jb.ids.begin() + jb.offsets[bag], jb.ids.begin() + jb.offsets[bag + 1]);
            b.offsets.push_back(static_cast<uint32_t>(b.ids.size()));
          }
          b.dense.insert(b.dense.end(), jb.dense.begin() + i * jb.dense_features,
                         jb.dense.begin() + (i + 1) * jb.dense_features);
          b.labels.push_back(jb.labels[i]);
          ++b.size;
        }
      }
    }
    n = std::min(n, b.size);
    if (n <= 0)
      break;
    auto err = check_score_input(m, b.size, b.offsets, b.ids, b.dense);
    if (!err.empty()) {
      std::cerr << "satrap predict: row " << first << ": " << err << "\n";
      return 1;
    }
    logits.resize(static_cast<size_t>(b.size));
    scorer.score(b.size, b.offsets, b.ids, b.dense, logits.data());
    for (int i = 0; i < n; ++i) {
      all_logits.push_back(logits[i]);
      labels.push_back(b.labels[i]);
      if (out)
        std::fprintf(out, "%g\t%.9g\n", b.labels[i], static_cast<double>(sigmoid(logits[i])));
      if (inst) {
        nlohmann::json slots = nlohmann::json::array();
        for (int s = 0; s < m.input_slots(); ++s) {  // serving adds the crosses itself
          auto bag = static_cast<size_t>(i) * b.slots + s;
          slots.push_back(std::vector<uint64_t>(b.ids.begin() + b.offsets[bag],
                                                b.ids.begin() + b.offsets[bag + 1]));
        }
        nlohmann::json x = {{"dense", std::vector<float>(b.dense.begin() + i * b.dense_features,
                                                         b.dense.begin() + (i + 1) * b.dense_features)},
                            {"slots", slots}};
        std::fprintf(inst, "%s\n", x.dump().c_str());
      }
    }
    rows += n;
  }
  if (out)
    std::fclose(out);
  if (inst)
    std::fclose(inst);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::vector<float> scores(all_logits.size());
  double positives = 0;
  for (size_t i = 0; i < all_logits.size(); ++i) {
    scores[i] = sigmoid(all_logits[i]);
    positives += labels[i] > 0.5f;
  }
  double auc = rows > 0 ? auc_exact(scores, labels) : std::nan("");
  double logloss = rows > 0 ? logloss_from_logits(all_logits, labels) : std::nan("");
  double p = rows > 0 ? positives / static_cast<double>(rows) : 0;
  double base = (p > 0 && p < 1) ? -(p * std::log(p) + (1 - p) * std::log(1 - p)) : std::nan("");
  double ne = logloss / base;
  double rps = secs > 0 ? static_cast<double>(rows) / secs : 0;
  std::printf("model %s version %s: %lld rows in %.2f s (%.0f rows/s)\n", m.meta().name.c_str(),
              m.meta().version.c_str(), static_cast<long long>(rows), secs, rps);
  std::printf("auc %.6f  logloss %.6f  ne %.6f\n", auc, logloss, ne);
  if (json_) {
    auto num = [](double x) { return std::isnan(x) ? nlohmann::json() : nlohmann::json(x); };
    nlohmann::json j = {{"model", m.meta().name}, {"version", m.meta().version},
                        {"auc", num(auc)},        {"logloss", num(logloss)},
                        {"ne", num(ne)},          {"rows", rows},
                        {"rows_per_sec", rps}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

// ---- satrap serve -------------------------------------------------------------------------------

void serve_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand("serve", "Answer prediction requests over HTTP/JSON with an exported "
                                     "model:\nPOST /v1/models/<name>:predict "
                                     "{\"instances\": [{\"dense\": [...], \"slots\": [[ids...], ...]}]}");
  auto* model = sub_->add_option("--model", model_, "the model folder to serve");
  auto* watch = sub_->add_option("--watch", watch_, "a folder of model folders: serve the newest, "
                                                    "reload when a newer one appears");
  model->excludes(watch);
  sub_->add_option("--host", host_, "address to bind")->capture_default_str();
  sub_->add_option("--port", port_, "port to bind")->capture_default_str();
  sub_->add_option("--threads", threads_, "scoring threads (0: one per core; at most 1024)")
    ->capture_default_str()->check(CLI::Range(0, 1024));
  sub_->add_option("--http-threads", http_threads_, "connections served at once (at most 4096)")
    ->capture_default_str()->check(CLI::Range(1, 4096));
  sub_->add_option("--max-batch", max_batch_, "instances scored together at most")->capture_default_str();
  sub_->add_option("--max-queue-delay-ms", max_delay_ms_,
                   "wait at most this long for more requests to batch")->capture_default_str();
  sub_->add_option("--watch-interval", watch_s_, "seconds between looks at --watch")->capture_default_str();
  sub_->add_option("--max-body-mb", max_body_mb_, "larger request bodies get 413")->capture_default_str();
  sub_->add_option("--admin-token-file", token_file_,
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
  o.host = host_;
  o.port = port_;
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
  std::fflush(stdout);
  while (!serve_stop)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.stop();
  return 0;
}

}  // namespace satrap
