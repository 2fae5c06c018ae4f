#include "runtime/model_server.hpp"

#include "models/serving/exported_model.hpp"
#include "models/serving/predict_request.hpp"
#include "runtime/http_server.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace satrap {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

std::atomic<int64_t> versions_mapped{0};

// One loaded export with its pool of scorers; freed (unmapped) when the last holder lets go.
struct served_version {
  explicit served_version(std::shared_ptr<const exported_model> m) : model(std::move(m)) {
    ++versions_mapped;
  }
  ~served_version() {
    scorers.clear();
    auto name = model->meta().version;
    model.reset();
    --versions_mapped;
    spdlog::info("model_unmapped version={}", name);
  }
  std::unique_ptr<model_scorer> take_scorer() {
    {
      std::lock_guard lk(mu);
      if (!scorers.empty()) {
        auto s = std::move(scorers.back());
        scorers.pop_back();
        return s;
      }
    }
    return std::make_unique<model_scorer>(model);
  }
  void give_scorer(std::unique_ptr<model_scorer> s) {
    std::lock_guard lk(mu);
    scorers.push_back(std::move(s));
  }
  std::shared_ptr<const exported_model> model;
  std::mutex mu;
  std::vector<std::unique_ptr<model_scorer>> scorers;
};

struct pending_request {
  std::shared_ptr<served_version> version;
  score_input input;
  std::vector<float> logits;
  clock_type::time_point enqueued;
  std::promise<void> done;
};

// Latency buckets (seconds) and batch-size buckets (instances).
constexpr std::array<double, 14> latency_bounds = {0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003,
                                                   0.005,  0.0075,  0.01,   0.025, 0.05,  0.1,
                                                   0.25,   1.0};
constexpr std::array<double, 10> batch_bounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024};

template <size_t N>
struct histogram {
  std::array<std::atomic<int64_t>, N + 1> counts{};
  std::atomic<int64_t> count{0};
  std::atomic<double> sum{0};
  void observe(double v, const std::array<double, N>& bounds) {
    size_t b = 0;
    while (b < N && v > bounds[b])
      ++b;
    ++counts[b];
    ++count;
    double old = sum.load();
    while (!sum.compare_exchange_weak(old, old + v)) {
    }
  }
  void render(std::ostringstream& os, const std::string& name, const std::array<double, N>& bounds) const {
    int64_t cumulative = 0;
    for (size_t b = 0; b < N; ++b) {
      cumulative += counts[b].load();
      os << name << "_bucket{le=\"" << bounds[b] << "\"} " << cumulative << "\n";
    }
    os << name << "_bucket{le=\"+Inf\"} " << count.load() << "\n";
    os << name << "_sum " << sum.load() << "\n" << name << "_count " << count.load() << "\n";
  }
};

http_response json_error(int status, const std::string& message) {
  std::string body = "{\"error\":\"";
  for (char c : message) {
    if (c == '"' || c == '\\')
      body += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      continue;
    body += c;
  }
  body += "\"}";
  return {status, "application/json", body};
}

}  // namespace

struct model_server::impl {
  model_server_options options;
  http_server http;
  // The version served now.
  mutable std::mutex current_mu;
  std::shared_ptr<served_version> current;
  std::mutex reload_mu;  // one load at a time
  // The queue of dynamic batching.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<pending_request>> queue;
  bool collecting = false;
  bool stopping = false;
  std::vector<std::thread> workers;
  std::thread watcher;
  std::mutex watch_mu;
  std::condition_variable watch_cv;
  // Metrics.
  histogram<latency_bounds.size()> latency;
  histogram<batch_bounds.size()> batches;
  std::mutex counters_mu;
  std::map<int, int64_t> requests_by_code;
  std::map<std::string, int64_t> errors_by_reason;
  std::atomic<int64_t> instances{0}, reloads{0}, reload_failures{0};

  std::shared_ptr<served_version> now() const {
    std::lock_guard lk(current_mu);
    return current;
  }

  void count(int code, const char* reason) {
    std::lock_guard lk(counters_mu);
    ++requests_by_code[code];
    if (reason)
      ++errors_by_reason[reason];
  }

  // Loads `dir` beside the current version and swaps it in. "" or why not.
  std::string load(const std::string& dir) {
    std::lock_guard lk(reload_mu);
    auto started = clock_type::now();
    auto m = exported_model::open(dir);
    if (!m) {
      ++reload_failures;
      spdlog::error("model_load_failed dir={} error=\"{}\"", dir, m.error());
      return m.error();
    }
    auto v = std::make_shared<served_version>(m.value());
    auto old = now();
    if (old && old->model->meta().name != v->model->meta().name) {
      ++reload_failures;
      return "the model in " + dir + " is named '" + v->model->meta().name + "', this server serves '"
             + old->model->meta().name + "'";
    }
    {
      std::lock_guard lk2(current_mu);
      current = v;
    }
    if (old)
      ++reloads;
    auto ms = std::chrono::duration<double, std::milli>(clock_type::now() - started).count();
    spdlog::info("model_loaded name={} version={} rows={} mapped_bytes={} ms={:.1f} dir={}",
                 v->model->meta().name, v->model->meta().version, v->model->rows(),
                 v->model->mapped_bytes(), ms, dir);
    return "";
  }

  // The newest complete model folder under watch_dir ("" when none).
  std::string newest_in_watch() const {
    std::string best;
    uint64_t best_ns = 0;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(options.watch_dir, ec)) {
      if (!e.is_directory(ec))
        continue;
      auto meta = exported_model_read_meta(e.path().string());
      if (meta && (best.empty() || meta->created_ns > best_ns)) {
        best = e.path().string();
        best_ns = meta->created_ns;
      }
    }
    return best;
  }

  void watch_loop() {
    std::string served = now() ? now()->model->dir() : "";
    std::unique_lock lk(watch_mu);
    while (!stopping) {
      watch_cv.wait_for(lk, options.watch_interval);
      if (stopping)
        break;
      auto dir = newest_in_watch();
      auto cur = now();
      if (dir.empty() || (cur && cur->model->dir() == dir) || dir == served)
        continue;
      served = dir;  // tried once: a broken export is not retried every interval
      auto cur_meta = cur ? cur->model->meta().created_ns : 0;
      auto meta = exported_model_read_meta(dir);
      if (meta && meta->created_ns > cur_meta)
        load(dir);
    }
  }

  void worker_loop() {
    std::unique_lock lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stopping || (!queue.empty() && !collecting); });
      if (stopping && queue.empty())
        return;
      collecting = true;
      std::vector<std::shared_ptr<pending_request>> batch;
      int n = 0;
      auto version = queue.front()->version;
      auto deadline = queue.front()->enqueued + options.max_queue_delay;
      for (;;) {
        while (!queue.empty() && queue.front()->version == version
               && (n == 0 || n + queue.front()->input.size <= options.max_batch)) {
          n += queue.front()->input.size;
          batch.push_back(std::move(queue.front()));
          queue.pop_front();
        }
        if (n >= options.max_batch || stopping || !queue.empty())
          break;  // full, or the next request is of another version or would not fit
        if (cv.wait_until(lk, deadline) == std::cv_status::timeout && queue.empty())
          break;
      }
      collecting = false;
      cv.notify_all();
      lk.unlock();
      score(version, batch, n);
      lk.lock();
    }
  }

  void score(const std::shared_ptr<served_version>& v,
             std::vector<std::shared_ptr<pending_request>>& batch, int n) {
    batches.observe(n, batch_bounds);
    instances += n;
    auto scorer = v->take_scorer();
    if (batch.size() == 1) {
      auto& r = *batch[0];
      r.logits.resize(static_cast<size_t>(r.input.size));
      scorer->score(r.input.size, r.input.offsets, r.input.ids, r.input.dense, r.logits.data());
    } else {
      score_input all;
      all.size = n;
      all.offsets.push_back(0);
      for (auto& r : batch) {
        auto base = static_cast<uint32_t>(all.ids.size());
        for (size_t b = 1; b < r->input.offsets.size(); ++b)
          all.offsets.push_back(base + r->input.offsets[b]);
        all.ids.insert(all.ids.end(), r->input.ids.begin(), r->input.ids.end());
        all.dense.insert(all.dense.end(), r->input.dense.begin(), r->input.dense.end());
      }
      std::vector<float> logits(static_cast<size_t>(n));
      scorer->score(n, all.offsets, all.ids, all.dense, logits.data());
      size_t at = 0;
      for (auto& r : batch) {
        r->logits.assign(logits.begin() + at, logits.begin() + at + r->input.size);
        at += r->input.size;
      }
    }
    v->give_scorer(std::move(scorer));
    for (auto& r : batch)
      r->done.set_value();
  }

  http_response predict(const http_request& req, const std::string& name) {
    auto v = now();  // the version that answers this request, pinned until it ends
    if (!v)
      return count(503, "not_ready"), json_error(503, "no model loaded yet");
    const auto& meta = v->model->meta();
    if (name != meta.name)
      return count(404, "unknown_model"),
             json_error(404, "no model named '" + name + "' (this server serves '" + meta.name
                               + "': POST /v1/models/" + meta.name + ":predict)");
    predict_request_limits limits;
    limits.slots = v->model->slots();
    limits.dense_features = v->model->dense_features();
    limits.max_instances = options.max_instances;
    auto parsed = parse_predict_request(req.body, limits);
    if (!parsed.error.empty())
      return count(400, "bad_request"), json_error(400, parsed.error);
    auto& in = parsed.input;
    for (auto id : in.ids)
      if (!v->model->holds(id))
        return count(400, "partition_not_held"),
               json_error(400, "id " + std::to_string(id) + ": its partition is not held by this "
                                 "server (route it to the server of that partition)");
    auto p = std::make_shared<pending_request>();
    p->version = v;
    p->input = std::move(in);
    p->enqueued = clock_type::now();
    auto done = p->done.get_future();
    {
      std::lock_guard lk(mu);
      if (stopping)
        return count(503, "stopping"), json_error(503, "the server is stopping");
      queue.push_back(p);
    }
    cv.notify_all();
    done.wait();
    auto body = predict_response_json(meta.name, meta.version, p->logits.data(), p->logits.size());
    count(200, nullptr);
    return {200, "application/json", std::move(body)};
  }

  std::string metrics_text() const {
    std::ostringstream os;
    os << "# TYPE satrap_serve_requests_total counter\n";
    {
      std::lock_guard lk(const_cast<std::mutex&>(counters_mu));
      for (auto& [code, n] : requests_by_code)
        os << "satrap_serve_requests_total{code=\"" << code << "\"} " << n << "\n";
      os << "# TYPE satrap_serve_errors_total counter\n";
      for (auto& [reason, n] : errors_by_reason)
        os << "satrap_serve_errors_total{reason=\"" << reason << "\"} " << n << "\n";
    }
    os << "# TYPE satrap_serve_request_seconds histogram\n";
    latency.render(os, "satrap_serve_request_seconds", latency_bounds);
    os << "# TYPE satrap_serve_batch_instances histogram\n";
    batches.render(os, "satrap_serve_batch_instances", batch_bounds);
    os << "# TYPE satrap_serve_instances_total counter\nsatrap_serve_instances_total "
       << instances.load() << "\n";
    os << "# TYPE satrap_serve_reloads_total counter\nsatrap_serve_reloads_total " << reloads.load()
       << "\nsatrap_serve_reload_failures_total " << reload_failures.load() << "\n";
    os << "# TYPE satrap_serve_versions_mapped gauge\nsatrap_serve_versions_mapped "
       << versions_mapped.load() << "\n";
    if (auto v = now())
      os << "satrap_serve_model_info{name=\"" << v->model->meta().name << "\",version=\""
         << v->model->meta().version << "\"} 1\n";
    return os.str();
  }

  http_response handle(const http_request& req) {
    auto started = clock_type::now();
    auto res = route(req);
    if (req.path.rfind("/v1/models/", 0) == 0 && req.method == "POST")
      latency.observe(std::chrono::duration<double>(clock_type::now() - started).count(),
                      latency_bounds);
    return res;
  }

  http_response route(const http_request& req) {
    const auto& path = req.path;
    if (path == "/healthz")
      return {200, "text/plain; charset=utf-8", "ok\n"};
    if (path == "/readyz") {
      auto v = now();
      return v ? http_response{200, "text/plain; charset=utf-8", "ready " + v->model->meta().version + "\n"}
               : http_response{503, "text/plain; charset=utf-8", "no model loaded\n"};
    }
    if (path == "/metrics")
      return {200, "text/plain; version=0.0.4", metrics_text()};
    if (path == "/admin/reload") {
      if (req.method != "POST")
        return json_error(405, "use POST /admin/reload");
      if (options.admin_token.empty())
        return count(403, "admin"), json_error(403, "reloading on request is off (start serve with --admin-token-file)");
      if (req.header("Authorization") != "Bearer " + options.admin_token)
        return count(401, "admin"), json_error(401, "wrong or missing admin token (Authorization: Bearer <token>)");
      std::string dir;
      if (auto it = req.params.find("dir"); it != req.params.end())
        dir = it->second;
      else if (!options.watch_dir.empty())
        dir = newest_in_watch();
      if (dir.empty())
        return json_error(400, "give ?dir=<model folder> (no watched folder, or nothing in it)");
      auto err = load(dir);
      if (!err.empty())
        return json_error(422, "reload failed, still serving the previous version: " + err);
      return {200, "application/json", "{\"version\":\"" + now()->model->meta().version + "\"}"};
    }
    const std::string prefix = "/v1/models/";
    if (path.rfind(prefix, 0) == 0) {
      auto rest = path.substr(prefix.size());
      auto colon = rest.find(':');
      if (colon != std::string::npos) {
        if (rest.substr(colon) != ":predict")
          return count(404, "unknown_path"), json_error(404, "unknown verb '" + rest.substr(colon + 1) + "' (use :predict)");
        if (req.method != "POST")
          return count(405, "method"), json_error(405, "use POST for :predict");
        return predict(req, rest.substr(0, colon));
      }
      auto v = now();
      if (!v)
        return json_error(503, "no model loaded yet");
      if (rest != v->model->meta().name)
        return json_error(404, "no model named '" + rest + "'");
      return {200, "application/json",
              "{\"model_version_status\":[{\"version\":\"" + v->model->meta().version
                + "\",\"state\":\"AVAILABLE\"}]}"};
    }
    count(404, "unknown_path");
    return json_error(404, "unknown path " + path + " (POST /v1/models/<name>:predict, GET /healthz, /readyz, /metrics)");
  }
};

model_server::model_server() : impl_(std::make_unique<impl>()) {}
model_server::~model_server() { stop(); }

std::string model_server::start(const model_server_options& o) {
  auto& im = *impl_;
  im.options = o;
  if (im.options.workers <= 0)
    im.options.workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (im.options.max_batch <= 0)
    return "max batch: expected at least 1";
  std::string first = o.model_dir;
  if (first.empty() && !o.watch_dir.empty()) {
    first = im.newest_in_watch();
    if (first.empty())
      return o.watch_dir + ": holds no complete model folder (export one there first)";
  }
  if (first.empty())
    return "give a model folder or a folder to watch";
  if (auto err = im.load(first); !err.empty())
    return err;
  for (int i = 0; i < im.options.workers; ++i)
    im.workers.emplace_back([&im] { im.worker_loop(); });
  http_limits limits;
  limits.threads = static_cast<size_t>(std::max(1, o.http_threads));
  limits.max_body_bytes = o.max_body_bytes;
  limits.read_timeout = o.read_timeout;
  auto err = im.http.start(o.host, o.port, [&im](const http_request& r) { return im.handle(r); },
                           limits);
  if (!err.empty()) {
    stop();
    return err;
  }
  if (!o.watch_dir.empty())
    im.watcher = std::thread([&im] { im.watch_loop(); });
  spdlog::info("serve_started host={} port={} workers={} max_batch={} max_queue_delay_us={}",
               o.host, o.port, im.options.workers, o.max_batch, o.max_queue_delay.count());
  return "";
}

void model_server::stop() {
  if (!impl_)
    return;
  auto& im = *impl_;
  im.http.stop();
  {
    std::lock_guard lk(im.mu);
    std::lock_guard lk2(im.watch_mu);
    im.stopping = true;
  }
  im.cv.notify_all();
  im.watch_cv.notify_all();
  for (auto& w : im.workers)
    if (w.joinable())
      w.join();
  im.workers.clear();
  if (im.watcher.joinable())
    im.watcher.join();
}

std::string model_server::version() const {
  auto v = impl_->now();
  return v ? v->model->meta().version : "";
}

}  // namespace satrap
