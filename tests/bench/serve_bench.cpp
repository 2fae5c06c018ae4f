// serve_bench: online serving (serving/model_server.hpp) under a closed-loop load on loopback,
// against an in-process scoring loop over the same instances in the same run.
//
// usage: serve_bench MODEL INSTANCES.jsonl [seconds=3] [connections=8] [port=5310] [rounds=1]
//                    [only=PHASE] (one load phase alone, for a profiler: bin1, bin64, json64, ...)
//        serve_bench MODEL INSTANCES.jsonl SECONDS CONNECTIONS PORT ROUNDS targets PORT,PORT,...
//                    the /v1 JSON phases (json1, json64) against servers running elsewhere (a
//                    fleet's router and one server: tests/bench/fleet_bench.sh), interleaved
//                    round by round; the last line has each target's medians
//   MODEL: a model folder; INSTANCES: one request instance per line (satrap predict --instances).
// The client: K threads, each with one kept-alive TCP connection (TCP_NODELAY) sending prebuilt
// HTTP/1.1 requests (the whole request in one write) and reading each response (its headers,
// then Content-Length bytes) before the next: a small C++ client here, so that the load costs
// the shared cores as little as possible and the same client drives every route.
// Phases, each `seconds` long, every connection sending its next request as soon as the previous
// answer is in:
//   bin1      KServe v2 binary extension (POST /v2/models/<m>/infer, FP32 dense and INT64 ids as
//             raw bytes, binary outputs), 1 instance per request: the maximum QPS
//   bin64     the same, 64 instances per request
//   binhalf   1 instance per request paced at half bin1's QPS (open schedule per connection)
//   v2json64  KServe v2 with JSON tensors, 64 instances
//   json1, json64, jsonhalf   the /v1 JSON route (TF-Serving-like), as above
//   inprocess model_scorer on batches of 64 of the same instances, one thread per scoring worker
// Each 64-instance phase runs between two in-process runs, and its ratio is against their mean
// (the load of a shared machine moves over seconds). Rounds: with rounds > 1 everything repeats;
// the last line's figures are medians over the rounds.
// Prints one line per phase, then the last line:
//   inprocess_ratio=... (bin64's instances/s over in-process) json_inprocess_ratio=... (json64's)
//   v2json_inprocess_ratio=... bin64_qps, bin64_p99_ms, bin1_max_qps, half_load_qps,
//   half_load_p99_ms (binhalf), json_half_load_p99_ms, inprocess_instances_per_s
// gRPC mode (only=grpc, in a build with gRPC): KServe v2 over gRPC (satrap serve --grpc-port, on
// port+1) from a C++ client of grpc_predict_v2.proto's stub (one channel, so one HTTP/2
// connection, per client thread; raw_input_contents, the predictions output):
//   grpc64    64 instances per request, between in-process runs, then bin64 (HTTP) the same way
//   grpc1     1 instance per request: the maximum QPS; grpchalf at half that rate
// and the last line: inprocess_ratio=... (grpc64's instances/s over in-process)
//   http_bin_inprocess_ratio=... grpc64_qps, grpc64_p99_ms, grpc1_max_qps, half_load_qps,
//   half_load_p99_ms (grpchalf), inprocess_instances_per_s, errors.
// Exits 1 when a request failed (a status other than 200 or a broken connection).
// Threading: the server's threads, one client thread per connection, the in-process threads.
#include "models/serving/exported_model.hpp"
#include "models/serving/predict_request.hpp"
#include "serving/model_server.hpp"

#if SATRAP_HAVE_GRPC
#include "grpc_predict_v2.grpc.pb.h"

#include <grpcpp/grpcpp.h>
#endif

#include <cblas.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
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

double median(std::vector<double> v) { return percentile(v, 0.5); }

// A phase's figures from each connection's latencies over `secs` seconds.
phase_result summarize(const std::vector<std::vector<double>>& lat, double secs, int per_request,
                       int64_t errors) {
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

// One kept-alive connection: a whole prebuilt request out, one response in.
class raw_client {
 public:
  explicit raw_client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~raw_client() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  static inline std::atomic<int64_t> closed_by_server{0};

  // The response's status, or 0 when the connection failed (it is then closed).
  int roundtrip(const std::string& request) {
    size_t sent = 0;
    while (sent < request.size()) {
      auto n = ::send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0)
        return fail();
      sent += static_cast<size_t>(n);
    }
    buf_.clear();
    size_t head_end = std::string::npos;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!fill())
        return fail();
    int status = std::atoi(buf_.c_str() + 9);
    size_t length = 0;
    bool close_after = false;
    for (size_t at = buf_.find("\r\n"); at < head_end;) {
      size_t next = buf_.find("\r\n", at + 2);
      if (strncasecmp(buf_.c_str() + at + 2, "Content-Length:", 15) == 0)
        length = std::strtoull(buf_.c_str() + at + 17, nullptr, 10);
      if (strncasecmp(buf_.c_str() + at + 2, "Connection: close", 17) == 0)
        close_after = true;
      at = next;
    }
    while (buf_.size() < head_end + 4 + length)
      if (!fill())
        return fail();
    ++requests_;
    if (close_after) {  // the server ends the connection: the next request opens another
      ++closed_by_server;
      fail();
    }
    return status;
  }

 private:
  bool fill() {
    char tmp[65536];
    auto n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0)
      return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  int fail() {
    ::close(fd_);
    fd_ = -1;
    return 0;
  }
  int fd_ = -1;
  int64_t requests_ = 0;
  std::string buf_;
};

std::string http_post(const std::string& path, const std::string& body, const char* type,
                      size_t header_length = std::string::npos) {
  std::string r = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: " + type
                  + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  if (header_length != std::string::npos)
    r += "Inference-Header-Content-Length: " + std::to_string(header_length) + "\r\n";
  return r + "\r\n" + body;
}

// K connections for `seconds`; pace > 0: each connection sends at most every `pace` seconds.
phase_result load(uint16_t port, const std::vector<std::string>& requests, int per_request, int k,
                  double seconds, double pace = 0) {
  std::vector<std::vector<double>> lat(static_cast<size_t>(k));
  std::atomic<int64_t> errors{0};
  auto start = clock_type::now();
  auto end = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < k; ++c)
    threads.emplace_back([&, c] {
      auto cli = std::make_unique<raw_client>(port);
      size_t i = static_cast<size_t>(c) * 7919;
      auto next = clock_type::now() + std::chrono::duration<double>(pace * c / k);
      while (clock_type::now() < end) {
        if (pace > 0) {
          std::this_thread::sleep_until(next);
          next +=
            std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(pace));
        }
        if (!cli->ok())
          cli = std::make_unique<raw_client>(port);
        auto t0 = clock_type::now();
        int status = cli->roundtrip(requests[i++ % requests.size()]);
        auto ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
        if (status != 200) {
          ++errors;
          continue;
        }
        lat[static_cast<size_t>(c)].push_back(ms);
      }
    });
  for (auto& t : threads)
    t.join();
  return summarize(lat, std::chrono::duration<double>(clock_type::now() - start).count(),
                   per_request, errors);
}

// A KServe v2 binary request of `rows` (dense FP32 [N, D], ids INT64 [N, S], binary outputs).
std::string v2_binary(const std::vector<nlohmann::json>& rows, int d, int s,
                      const std::string& path, bool binary_out = true) {
  std::string dense, ids;
  for (auto& r : rows) {
    for (auto& x : r["dense"]) {
      float f = x.get<float>();
      dense.append(reinterpret_cast<const char*>(&f), 4);
    }
    for (auto& bag : r["slots"]) {
      uint64_t id = bag.at(0).is_string() ? std::stoull(bag.at(0).get<std::string>())
                                          : bag.at(0).get<uint64_t>();
      ids.append(reinterpret_cast<const char*>(&id), 8);
    }
  }
  auto n = std::to_string(rows.size());
  std::string head = "{\"inputs\":[";
  if (d > 0)
    head += "{\"name\":\"dense\",\"shape\":[" + n + "," + std::to_string(d)
            + "],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":"
            + std::to_string(dense.size()) + "}},";
  head += "{\"name\":\"ids\",\"shape\":[" + n + "," + std::to_string(s)
          + "],\"datatype\":\"INT64\",\"parameters\":{\"binary_data_size\":"
          + std::to_string(ids.size()) + "}}],\"outputs\":[{\"name\":\"predictions\","
          + "\"parameters\":{\"binary_data\":" + (binary_out ? "true" : "false") + "}}]}";
  return http_post(path, head + (d > 0 ? dense : "") + ids, "application/octet-stream",
                   head.size());
}

// The same rows as a KServe v2 JSON request.
std::string v2_json(const std::vector<nlohmann::json>& rows, int d, int s,
                    const std::string& path) {
  nlohmann::json dense = nlohmann::json::array(), ids = nlohmann::json::array();
  for (auto& r : rows) {
    for (auto& x : r["dense"])
      dense.push_back(x);
    for (auto& bag : r["slots"]) {
      uint64_t id = bag.at(0).is_string() ? std::stoull(bag.at(0).get<std::string>())
                                          : bag.at(0).get<uint64_t>();
      ids.push_back(static_cast<int64_t>(id));
    }
  }
  auto n = static_cast<int64_t>(rows.size());
  nlohmann::json req = {
    {"inputs",
     {{{"name", "dense"}, {"shape", {n, d}}, {"datatype", "FP32"}, {"data", dense}},
      {{"name", "ids"}, {"shape", {n, s}}, {"datatype", "INT64"}, {"data", ids}}}},
    {"outputs", {{{"name", "predictions"}}}}};
  if (d == 0)
    req["inputs"].erase(0);
  return http_post(path, req.dump(), "application/json");
}

#if SATRAP_HAVE_GRPC
// The same rows as a KServe v2 gRPC request (raw_input_contents, the predictions output).
inference::ModelInferRequest grpc_request(const std::vector<nlohmann::json>& rows, int d, int s,
                                          const std::string& model) {
  inference::ModelInferRequest req;
  req.set_model_name(model);
  std::string dense, ids;
  for (auto& r : rows) {
    for (auto& x : r["dense"]) {
      float f = x.get<float>();
      dense.append(reinterpret_cast<const char*>(&f), 4);
    }
    for (auto& bag : r["slots"]) {
      uint64_t id = bag.at(0).is_string() ? std::stoull(bag.at(0).get<std::string>())
                                          : bag.at(0).get<uint64_t>();
      ids.append(reinterpret_cast<const char*>(&id), 8);
    }
  }
  auto n = static_cast<int64_t>(rows.size());
  if (d > 0) {
    auto* t = req.add_inputs();
    t->set_name("dense");
    t->set_datatype("FP32");
    t->add_shape(n);
    t->add_shape(d);
    req.add_raw_input_contents(dense);
  }
  auto* t = req.add_inputs();
  t->set_name("ids");
  t->set_datatype("INT64");
  t->add_shape(n);
  t->add_shape(s);
  req.add_raw_input_contents(ids);
  req.add_outputs()->set_name("predictions");
  return req;
}

// load()'s closed (or paced) loop over gRPC: one channel per client thread.
phase_result grpc_load(uint16_t port, const std::vector<inference::ModelInferRequest>& requests,
                       int per_request, int k, double seconds, double pace = 0) {
  std::vector<std::vector<double>> lat(static_cast<size_t>(k));
  std::atomic<int64_t> errors{0};
  auto start = clock_type::now();
  auto end = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < k; ++c)
    threads.emplace_back([&, c] {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
      auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                               grpc::InsecureChannelCredentials(), args);
      auto stub = inference::GRPCInferenceService::NewStub(channel);
      size_t i = static_cast<size_t>(c) * 7919;
      auto next = clock_type::now() + std::chrono::duration<double>(pace * c / k);
      while (clock_type::now() < end) {
        if (pace > 0) {
          std::this_thread::sleep_until(next);
          next +=
            std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(pace));
        }
        grpc::ClientContext ctx;
        inference::ModelInferResponse res;
        auto t0 = clock_type::now();
        auto status = stub->ModelInfer(&ctx, requests[i++ % requests.size()], &res);
        auto ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
        if (!status.ok() || res.raw_output_contents_size() != 1) {
          ++errors;
          if (errors == 1)
            std::fprintf(stderr, "serve_bench: gRPC: %s\n", status.error_message().c_str());
          continue;
        }
        lat[static_cast<size_t>(c)].push_back(ms);
      }
    });
  for (auto& t : threads)
    t.join();
  return summarize(lat, std::chrono::duration<double>(clock_type::now() - start).count(),
                   per_request, errors);
}
#endif

void print_phase(const char* name, int k, const phase_result& r, double target = 0) {
  std::printf("phase=%s connections=%d", name, k);
  if (target > 0)
    std::printf(" target_qps=%.0f", target);
  std::printf(" qps=%.0f p50_ms=%.3f p99_ms=%.3f instances_per_s=%.0f errors=%lld\n", r.qps,
              r.p50_ms, r.p99_ms, r.instances_per_s, static_cast<long long>(r.errors));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: serve_bench MODEL INSTANCES.jsonl [seconds=3] [connections=8] "
                 "[port=5310] [rounds=1]\n");
    return 2;
  }
  std::string model_dir = argv[1];
  double seconds = argc > 3 ? std::atof(argv[3]) : 3.0;
  int k = argc > 4 ? std::atoi(argv[4]) : 8;
  auto port = static_cast<uint16_t>(argc > 5 ? std::atoi(argv[5]) : 5310);
  int rounds = std::max(1, argc > 6 ? std::atoi(argv[6]) : 1);
  std::string only = argc > 7 ? argv[7] : "";
  openblas_set_num_threads(1);
  spdlog::set_level(spdlog::level::warn);
  auto model = exported_model::open(model_dir);
  if (!model) {
    std::fprintf(stderr, "serve_bench: %s\n", model.error().c_str());
    return 2;
  }
  const auto& m = *model.value();
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
  for (auto& x : inst)
    for (auto& bag : x["slots"])
      if (bag.size() != 1) {
        std::fprintf(stderr, "serve_bench: the binary phases need one id per slot\n");
        return 2;
      }
  const int d = m.dense_features(), s = m.input_slots();
  const auto v1 = "/v1/models/" + m.meta().name + ":predict";
  const auto v2 = "/v2/models/" + m.meta().name + "/infer";
  std::vector<std::string> json1, json64, bin1, bin64, v2json64;
  for (auto& x : inst) {
    json1.push_back(http_post(v1, nlohmann::json{{"instances", nlohmann::json::array({x})}}.dump(),
                              "application/json"));
    bin1.push_back(v2_binary({x}, d, s, v2));
  }
  std::vector<score_input> inputs;  // the 64-instance batches, for the in-process run
  predict_request_limits limits;
  limits.slots = s;
  limits.dense_features = d;
  for (size_t a = 0; a + 64 <= inst.size(); a += 64) {
    std::vector<nlohmann::json> rows(inst.begin() + static_cast<ptrdiff_t>(a),
                                     inst.begin() + static_cast<ptrdiff_t>(a + 64));
    auto body = nlohmann::json{{"instances", rows}}.dump();
    auto p = parse_predict_request(body, limits);
    if (!p.error.empty()) {
      std::fprintf(stderr, "serve_bench: %s\n", p.error.c_str());
      return 1;
    }
    add_crosses(m.meta().crosses, p.input.size, s, p.input.offsets, p.input.ids);
    inputs.push_back(std::move(p.input));
    json64.push_back(http_post(v1, body, "application/json"));
    bin64.push_back(v2_binary(rows, d, s, v2));
    v2json64.push_back(v2_json(rows, d, s, v2));
  }
  std::printf("bytes_per_request: json64=%zu v2json64=%zu bin64=%zu json1=%zu bin1=%zu\n",
              json64[0].size(), v2json64[0].size(), bin64[0].size(), json1[0].size(),
              bin1[0].size());

  const bool grpc_mode = only == "grpc";
#if SATRAP_HAVE_GRPC
  std::vector<inference::ModelInferRequest> grpc1, grpc64;
  if (grpc_mode) {
    for (auto& x : inst)
      grpc1.push_back(grpc_request({x}, d, s, m.meta().name));
    for (size_t a = 0; a + 64 <= inst.size(); a += 64)
      grpc64.push_back(
        grpc_request(std::vector<nlohmann::json>(inst.begin() + static_cast<ptrdiff_t>(a),
                                                 inst.begin() + static_cast<ptrdiff_t>(a + 64)),
                     d, s, m.meta().name));
    std::printf("bytes_per_grpc_request: grpc64=%zu grpc1=%zu\n", grpc64[0].ByteSizeLong(),
                grpc1[0].ByteSizeLong());
  }
#else
  if (grpc_mode) {
    std::fprintf(stderr,
                 "serve_bench: built without gRPC (libgrpc++-dev, protobuf-compiler-grpc)\n");
    return 2;
  }
#endif
  model_server_options o;
  o.model_dir = model_dir;
  o.port = port;
  o.grpc_port = grpc_mode ? static_cast<uint16_t>(port + 1) : 0;
  o.http_threads = k + 4;
  model_server server;
  if (auto err = server.start(o); !err.empty()) {
    std::fprintf(stderr, "serve_bench: %s\n", err.c_str());
    return 1;
  }
  int workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto inprocess = [&] {
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
          scorer.score(in, logits.data());
          n += in.size;
        }
        scored += n;
      });
    for (auto& t : threads)
      t.join();
    double secs = std::chrono::duration<double>(clock_type::now() - start).count();
    return static_cast<double>(scored.load()) / secs;
  };

  std::map<std::string, std::vector<double>> fig;
  if (only == "targets") {
    std::vector<uint16_t> targets;
    for (std::string t = argc > 8 ? argv[8] : ""; !t.empty();) {
      auto comma = t.find(',');
      targets.push_back(static_cast<uint16_t>(std::atoi(t.substr(0, comma).c_str())));
      t = comma == std::string::npos ? "" : t.substr(comma + 1);
    }
    for (auto t : targets) {
      load(t, json1, 1, k, 0.3);  // warm up
      load(t, json64, 64, k, 0.3);
    }
    double errors = 0;
    for (int round = 0; round < rounds; ++round)
      for (auto t : targets) {
        auto j1 = load(t, json1, 1, k, seconds);
        auto j64 = load(t, json64, 64, k, seconds);
        std::printf("target=%u ", t);
        print_phase("json1", k, j1);
        std::printf("target=%u ", t);
        print_phase("json64", k, j64);
        auto key = std::to_string(t);
        fig[key + "_json1_qps"].push_back(j1.qps);
        fig[key + "_json1_p50_ms"].push_back(j1.p50_ms);
        fig[key + "_json1_p99_ms"].push_back(j1.p99_ms);
        fig[key + "_json64_qps"].push_back(j64.qps);
        fig[key + "_json64_p50_ms"].push_back(j64.p50_ms);
        fig[key + "_json64_p99_ms"].push_back(j64.p99_ms);
        errors += static_cast<double>(j1.errors + j64.errors);
      }
    server.stop();
    std::printf("rounds=%d", rounds);
    for (auto& [key, v] : fig)
      std::printf(" target_%s=%.3f", key.c_str(), median(v));
    std::printf("\n");
    return errors > 0 ? 1 : 0;
  }
#if SATRAP_HAVE_GRPC
  if (grpc_mode) {
    const auto gport = static_cast<uint16_t>(port + 1);
    grpc_load(gport, grpc1, 1, k, 0.5);  // warm up
    load(port, bin1, 1, k, 0.3);
    for (int round = 0; round < rounds; ++round) {
      double in0 = inprocess();
      auto g64 = grpc_load(gport, grpc64, 64, k, seconds);
      print_phase("grpc64", k, g64);
      double in1 = inprocess();
      auto b64 = load(port, bin64, 64, k, seconds);
      print_phase("bin64", k, b64);
      double in2 = inprocess();
      std::printf("phase=inprocess threads=%d instances_per_s=%.0f %.0f %.0f\n", workers, in0, in1,
                  in2);
      auto g1 = grpc_load(gport, grpc1, 1, k, seconds);
      print_phase("grpc1", k, g1);
      double half_rate = g1.qps / 2;
      auto gh = grpc_load(gport, grpc1, 1, k, seconds, half_rate > 0 ? k / half_rate : 0.01);
      print_phase("grpchalf", k, gh, half_rate);
      double r_grpc = g64.instances_per_s / ((in0 + in1) / 2);
      double r_bin = b64.instances_per_s / ((in1 + in2) / 2);
      std::printf(
        "round=%d inprocess_ratio=%.3f http_bin_inprocess_ratio=%.3f "
        "half_load_p99_ms=%.3f\n",
        round, r_grpc, r_bin, gh.p99_ms);
      std::fflush(stdout);
      fig["inprocess_ratio"].push_back(r_grpc);
      fig["http_bin_inprocess_ratio"].push_back(r_bin);
      fig["grpc64_qps"].push_back(g64.qps);
      fig["grpc64_p50_ms"].push_back(g64.p50_ms);
      fig["grpc64_p99_ms"].push_back(g64.p99_ms);
      fig["grpc1_max_qps"].push_back(g1.qps);
      fig["grpc1_p50_ms"].push_back(g1.p50_ms);
      fig["grpc1_p99_ms"].push_back(g1.p99_ms);
      fig["half_load_qps"].push_back(gh.qps);
      fig["half_load_p99_ms"].push_back(gh.p99_ms);
      fig["inprocess_instances_per_s"].push_back((in0 + in1 + in2) / 3);
      fig["errors"].push_back(static_cast<double>(g64.errors + b64.errors + g1.errors + gh.errors));
    }
    server.stop();
    std::printf("rounds=%d", rounds);
    for (const char* key :
         {"inprocess_ratio", "http_bin_inprocess_ratio", "grpc64_qps", "grpc64_p50_ms",
          "grpc64_p99_ms", "grpc1_max_qps", "grpc1_p50_ms", "grpc1_p99_ms", "half_load_qps",
          "half_load_p99_ms", "inprocess_instances_per_s", "errors"})
      std::printf(" %s=%.3f", key, median(fig[key]));
    std::printf("\n");
    double errors = 0;
    for (double e : fig["errors"])
      errors += e;
    return errors > 0 ? 1 : 0;
  }
#endif
  if (!only.empty()) {
    std::map<std::string, std::pair<const std::vector<std::string>*, int>> phases = {
      {"bin1", {&bin1, 1}},
      {"bin64", {&bin64, 64}},
      {"v2json64", {&v2json64, 64}},
      {"json1", {&json1, 1}},
      {"json64", {&json64, 64}}};
    auto it = phases.find(only);
    if (it == phases.end()) {
      std::fprintf(stderr, "serve_bench: unknown phase %s\n", only.c_str());
      return 2;
    }
    print_phase(only.c_str(), k, load(port, *it->second.first, it->second.second, k, seconds));
    server.stop();
    return 0;
  }
  load(port, bin1, 1, k, 0.5);  // warm up
  load(port, json1, 1, k, 0.3);
  // Each 64-instance phase sits between two in-process runs; its ratio is against their mean, so
  // that a shared machine's load, which moves over seconds, weighs on both sides alike.
  for (int round = 0; round < rounds; ++round) {
    double in0 = inprocess();
    auto b64 = load(port, bin64, 64, k, seconds);
    print_phase("bin64", k, b64);
    double in1 = inprocess();
    auto v2j = load(port, v2json64, 64, k, seconds);
    print_phase("v2json64", k, v2j);
    double in2 = inprocess();
    auto j64 = load(port, json64, 64, k, seconds);
    print_phase("json64", k, j64);
    double in3 = inprocess();
    std::printf("phase=inprocess threads=%d instances_per_s=%.0f %.0f %.0f %.0f\n", workers, in0,
                in1, in2, in3);
    auto b1 = load(port, bin1, 1, k, seconds);
    print_phase("bin1", k, b1);
    double half_rate = b1.qps / 2;
    auto bh = load(port, bin1, 1, k, seconds, half_rate > 0 ? k / half_rate : 0.01);
    print_phase("binhalf", k, bh, half_rate);
    auto j1 = load(port, json1, 1, k, seconds);
    print_phase("json1", k, j1);
    double jhalf_rate = j1.qps / 2;
    auto jh = load(port, json1, 1, k, seconds, jhalf_rate > 0 ? k / jhalf_rate : 0.01);
    print_phase("jsonhalf", k, jh, jhalf_rate);
    double r_bin = b64.instances_per_s / ((in0 + in1) / 2);
    double r_v2j = v2j.instances_per_s / ((in1 + in2) / 2);
    double r_json = j64.instances_per_s / ((in2 + in3) / 2);
    std::printf(
      "round=%d inprocess_ratio=%.3f json_inprocess_ratio=%.3f "
      "v2json_inprocess_ratio=%.3f half_load_p99_ms=%.3f\n",
      round, r_bin, r_json, r_v2j, bh.p99_ms);
    std::fflush(stdout);
    fig["inprocess_ratio"].push_back(r_bin);
    fig["json_inprocess_ratio"].push_back(r_json);
    fig["v2json_inprocess_ratio"].push_back(r_v2j);
    fig["bin64_qps"].push_back(b64.qps);
    fig["bin64_p99_ms"].push_back(b64.p99_ms);
    fig["json64_qps"].push_back(j64.qps);
    fig["bin1_max_qps"].push_back(b1.qps);
    fig["half_load_qps"].push_back(bh.qps);
    fig["half_load_p99_ms"].push_back(bh.p99_ms);
    fig["json_half_load_p99_ms"].push_back(jh.p99_ms);
    fig["inprocess_instances_per_s"].push_back((in0 + in1 + in2 + in3) / 4);
    fig["errors"].push_back(static_cast<double>(b1.errors + b64.errors + bh.errors + v2j.errors
                                                + j1.errors + j64.errors + jh.errors));
  }
  server.stop();
  std::printf("connections_closed_by_server=%lld\n",
              static_cast<long long>(raw_client::closed_by_server.load()));
  std::printf("rounds=%d", rounds);
  for (const char* key :
       {"inprocess_ratio", "json_inprocess_ratio", "v2json_inprocess_ratio", "bin64_qps",
        "bin64_p99_ms", "json64_qps", "bin1_max_qps", "half_load_qps", "half_load_p99_ms",
        "json_half_load_p99_ms", "inprocess_instances_per_s", "errors"})
    std::printf(" %s=%.3f", key, median(fig[key]));
  std::printf("\n");
  double errors = 0;
  for (double e : fig["errors"])
    errors += e;
  return errors > 0 ? 1 : 0;  // a request that failed is a bug, not a figure
}
