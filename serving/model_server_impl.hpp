// Inside serving/model_server (not for other code): the server's state, and its parts by concern:
//   model_server.cpp           start and stop, loading a version, the watched folder
//   model_server_batching.cpp  the predict path: a request is checked, queued, batched with others
//                              of its version and scored on a worker thread
//   model_server_routes.cpp    the HTTP routes and the /metrics text
//   model_server_v2.cpp        the KServe v2 (Open Inference Protocol) routes
//   grpc_service.cpp           KServe v2 over gRPC (built where gRPC is found)
// Threading: see model_server.hpp; every field says which mutex guards it.
#pragma once

#include "serving/model_server.hpp"

#include "serving/grpc_service.hpp"

#include "models/serving/exported_model.hpp"
#include "models/serving/predict_request.hpp"
#include "runtime/http_server.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace satrap {

namespace serve_detail {

using clock_type = std::chrono::steady_clock;

// Versions loaded and not yet freed (the served one and those still answering requests).
inline std::atomic<int64_t> versions_mapped{0};

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
constexpr std::array<double, 14> latency_bounds = {
  0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0};
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
    while (!sum.compare_exchange_weak(old, old + v)) {}
  }
  void render(std::ostringstream& os, const std::string& name,
              const std::array<double, N>& bounds) const {
    int64_t cumulative = 0;
    for (size_t b = 0; b < N; ++b) {
      cumulative += counts[b].load();
      os << name << "_bucket{le=\"" << bounds[b] << "\"} " << cumulative << "\n";
    }
    os << name << "_bucket{le=\"+Inf\"} " << count.load() << "\n";
    os << name << "_sum " << sum.load() << "\n" << name << "_count " << count.load() << "\n";
  }
};

// A JSON error body {"error": message} with `status`.
http_response json_error(int status, const std::string& message);

}  // namespace serve_detail

using namespace serve_detail;

struct model_server::impl {
  model_server_options options;
  http_server http;
  std::unique_ptr<grpc_endpoint> grpc;  // options.grpc_port's service, when asked
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
  std::string load(const std::string& dir);
  // The newest complete model folder under watch_dir ("" when none).
  std::string newest_in_watch() const;
  void watch_loop();
  void worker_loop();
  // Scores `batch` (n instances) as one; `all` and `logits` are the worker's buffers.
  void score(const std::shared_ptr<served_version>& v,
             std::vector<std::shared_ptr<pending_request>>& batch, int n, score_input& all,
             std::vector<float>& logits);
  // Adds the crosses, checks the ids are held, queues `in` with the requests of its version and
  // waits for its logits: nullopt with `logits` set, or the error to answer.
  std::optional<http_response> score_request(const std::shared_ptr<served_version>& v,
                                             score_input in, std::vector<float>& logits);
  http_response predict(const http_request& req, const std::string& name);
  // The KServe v2 routes (model_server_v2.cpp): /v2, /v2/health/*, /v2/models/<name>/...
  http_response v2_route(const http_request& req);
  http_response v2_infer(const http_request& req, const std::shared_ptr<served_version>& v);
  std::string metrics_text() const;
  // KServe v2 over gRPC on options.grpc_port (grpc_service.cpp; only in a build with gRPC):
  // the running service, or nullptr with `error` set.
  std::unique_ptr<grpc_endpoint> start_grpc(std::string& error);
  http_response handle(const http_request& req);
  http_response route(const http_request& req);
  http_response partition_route(const http_request& req, const std::string& name,
                                const std::string& what);
};

}  // namespace satrap
