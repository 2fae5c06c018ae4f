// serve_bench: online serving (serving/model_server.hpp) under a closed-loop load on loopback,
// against an in-process scoring loop over the same instances in the same run.
//
// usage: serve_bench MODEL INSTANCES.jsonl [seconds=3] [connections=8] [port=5310]
//   MODEL: a model folder; INSTANCES: one request instance per line (satrap predict --instances).
// Phases, each `seconds` long, K keep-alive connections, every one sending its next request as
// soon as the previous answer is in:
//   1  requests of 1 instance: the maximum QPS
//   64 requests of 64 instances
//   half requests of 1 instance paced at half the maximum QPS (open schedule per connection)
//   inprocess  model_scorer on batches of 64 of the same instances, one thread per scoring worker
// Prints one line per phase, then the last line:
//   qps=... p50_ms=... p99_ms=... instances_per_s=... inprocess_ratio=... (the 64-instance phase)
//   followed by single_max_qps=... half_load_qps=... half_load_p99_ms=...
// Threading: the server's threads, one client thread per connection, the in-process threads.
#include "models/serving/exported_model.hpp"
#include "models/serving/predict_request.hpp"
#include "serving/model_server.hpp"

#include <cblas.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace satrap;
using clock_type = std::chrono::steady_clock;

namespace {

struct phase_result {
  double qps = 0, p50_ms = 0, p99_ms = 0, instances_per_s = 0;
  int64_t errors = 0;
};

double percentile(std::vector<double>& v, double q) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// K connections for `seconds`; pace > 0: each connection sends at most every `pace` seconds.
phase_result load(uint16_t port, const std::vector<std::string>& bodies, int per_request, int k,
                  double seconds, const std::string& path, double pace = 0) {
  std::vector<std::vector<double>> lat(static_cast<size_t>(k));
  std::atomic<int64_t> errors{0};
  auto start = clock_type::now();
  auto end = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < k; ++c)
    threads.emplace_back([&, c] {
      httplib::Client cli("127.0.0.1", port);
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);
      cli.set_read_timeout(10, 0);
      size_t i = static_cast<size_t>(c) * 7919;
      auto next = clock_type::now() + std::chrono::duration<double>(pace * c / k);
      while (clock_type::now() < end) {
        if (pace > 0) {
          std::this_thread::sleep_until(next);
          next +=
            std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(pace));
        }
        auto t0 = clock_type::now();
        auto res = cli.Post(path, bodies[i++ % bodies.size()], "application/json");
        auto ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
        if (!res || res->status != 200) {
          ++errors;
          continue;
        }
        lat[static_cast<size_t>(c)].push_back(ms);
      }
    });
  for (auto& t : threads)
    t.join();
  double secs = std::chrono::duration<double>(clock_type::now() - start).count();
  std::vector<double> all;
  for (auto& l : lat)
    all.insert(all.end(), l.begin(), l.end());
  phase_result r;
  r.qps = static_cast<double>(all.size()) / secs;
  r.instances_per_s = r.qps * per_request;
  r.p50_ms = percentile(all, 0.50);
  r.p99_ms = percentile(all, 0.99);
  r.errors = errors;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(
      stderr, "usage: serve_bench MODEL INSTANCES.jsonl [seconds=3] [connections=8] [port=5310]\n");
    return 2;
  }
  std::string model_dir = argv[1];
  double seconds = argc > 3 ? std::atof(argv[3]) : 3.0;
  int k = argc > 4 ? std::atoi(argv[4]) : 8;
  auto port = static_cast<uint16_t>(argc > 5 ? std::atoi(argv[5]) : 5310);
  openblas_set_num_threads(1);
  spdlog::set_level(spdlog::level::warn);
  auto model = exported_model::open(model_dir);
  if (!model) {
    std::fprintf(stderr, "serve_bench: %s\n", model.error().c_str());
    return 2;
  }
  std::vector<nlohmann::json> inst;
  {
    std::ifstream in(argv[2]);
    std::string line;
    while (std::getline(in, line))
      if (!line.empty())
        inst.push_back(nlohmann::json::parse(line));
  }
  if (inst.size() < 64) {
    std::fprintf(stderr, "serve_bench: need at least 64 instances, got %zu\n", inst.size());
    return 2;
  }
  std::vector<std::string> single, batch64;
  for (auto& x : inst)
    single.push_back(nlohmann::json{{"instances", nlohmann::json::array({x})}}.dump());
  for (size_t a = 0; a + 64 <= inst.size(); a += 64)
    batch64.push_back(nlohmann::json{
      {"instances", std::vector<nlohmann::json>(inst.begin() + a, inst.begin() + a + 64)}}
                        .dump());

  model_server_options o;
  o.model_dir = model_dir;
  o.port = port;
  o.http_threads = k + 4;
  model_server server;
  if (auto err = server.start(o); !err.empty()) {
    std::fprintf(stderr, "serve_bench: %s\n", err.c_str());
    return 1;
  }
  auto path = "/v1/models/" + model.value()->meta().name + ":predict";
  int workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  load(port, single, 1, k, 0.5, path);  // warm up
  auto one = load(port, single, 1, k, seconds, path);
  std::printf(
    "phase=1 connections=%d qps=%.0f p50_ms=%.3f p99_ms=%.3f instances_per_s=%.0f errors=%lld\n", k,
    one.qps, one.p50_ms, one.p99_ms, one.instances_per_s, static_cast<long long>(one.errors));
  auto b64 = load(port, batch64, 64, k, seconds, path);
  std::printf(
    "phase=64 connections=%d qps=%.0f p50_ms=%.3f p99_ms=%.3f instances_per_s=%.0f errors=%lld\n",
    k, b64.qps, b64.p50_ms, b64.p99_ms, b64.instances_per_s, static_cast<long long>(b64.errors));
  double half_rate = one.qps / 2;
  auto half = load(port, single, 1, k, seconds, path, half_rate > 0 ? k / half_rate : 0.01);
  std::printf(
    "phase=half connections=%d target_qps=%.0f qps=%.0f p50_ms=%.3f p99_ms=%.3f errors=%lld\n", k,
    half_rate, half.qps, half.p50_ms, half.p99_ms, static_cast<long long>(half.errors));
  server.stop();

  // The same instances scored in process: batches of 64, one thread per scoring worker.
  std::vector<score_input> inputs;
  predict_request_limits limits;
  limits.slots = model.value()->slots();
  limits.dense_features = model.value()->dense_features();
  for (auto& body : batch64) {
    auto p = parse_predict_request(body, limits);
    if (!p.error.empty()) {
      std::fprintf(stderr, "serve_bench: %s\n", p.error.c_str());
      return 1;
    }
    inputs.push_back(std::move(p.input));
  }
  std::atomic<int64_t> scored{0};
  auto start = clock_type::now();
  auto end = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      model_scorer scorer(model.value());
      std::vector<float> logits(64);
      size_t i = static_cast<size_t>(w);
      int64_t n = 0;
      while (clock_type::now() < end) {
        auto& in = inputs[i++ % inputs.size()];
        scorer.score(in.size, in.offsets, in.ids, in.dense, logits.data());
        n += in.size;
      }
      scored += n;
    });
  for (auto& t : threads)
    t.join();
  double secs = std::chrono::duration<double>(clock_type::now() - start).count();
  double inproc = static_cast<double>(scored.load()) / secs;
  std::printf("phase=inprocess threads=%d instances_per_s=%.0f\n", workers, inproc);
  std::printf(
    "qps=%.0f p50_ms=%.3f p99_ms=%.3f instances_per_s=%.0f inprocess_ratio=%.3f "
    "single_max_qps=%.0f half_load_qps=%.0f half_load_p99_ms=%.3f\n",
    b64.qps, b64.p50_ms, b64.p99_ms, b64.instances_per_s, b64.instances_per_s / inproc, one.qps,
    half.qps, half.p99_ms);
  return 0;
}
