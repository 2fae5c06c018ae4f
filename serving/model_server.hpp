// Online serving of an exported model (models/serving/) over HTTP/JSON (runtime/http_server).
//
// Endpoints (TF-Serving-like; body format in models/serving/predict_request.hpp):
//   POST /v1/models/<name>:predict   scores the instances; the answer names the model version
//   GET  /v1/models/<name>           the version served and its state
//   GET  /healthz                    200 while the process runs
//   GET  /readyz                     200 once a model is loaded, else 503
//   GET  /metrics                    Prometheus text: requests by code, request latency histogram,
//                                    scored batch sizes, errors by reason, reloads, versions mapped
//   POST /admin/reload               (Authorization: Bearer <admin token>) loads the model folder
//                                    given as ?dir=..., or the newest one in the watched folder
//   /v2/...                          KServe v2 / Open Inference Protocol: health, metadata, infer
//                                    with JSON or binary tensors (model_server_v2.cpp)
// A partition server of a fleet (`shards`: the export shards it holds; serving/model_router.hpp):
//   GET  /v1/models/<name>/partitions  {"name", "version", "partitions": P, "held": [[a, b), ...]}
//   POST /v1/models/<name>/rows        body: ids as little-endian uint64; answer: their rows as
//                                      little-endian float32 (dim each), the version in the
//                                      X-Satrap-Version header; an id of a partition not held is
//                                      a 400, a request pinning another version (the same header)
//                                      a 409 naming the version served
// gRPC (grpc_port, where the build has gRPC): KServe v2's inference.GRPCInferenceService on its
// own port (serving/grpc_service.hpp), the same infer path as /v2.
// Dynamic batching: a request is parsed and checked on an HTTP worker against the version it
// pins, then queued; `workers` scoring threads each take the oldest request and gather more of the
// same version until max_batch instances or max_queue_delay after the first one arrived, score
// them as one batch (model_scorer) and hand every request its own logits.
// Hot reload: a new version is opened (mapped, checksums checked) beside the old one, then swapped
// in under a mutex: a request pins the version current when it arrives and is answered wholly by
// it; the old version (its scorers and mapped files) is freed when its last request ends.
// A watched folder (`watch_dir`) holds model folders; the newest complete one (by created_ns in its
// MODEL.json) is served, checked every `watch_interval`.
// Memory: request bodies in flight are bounded (max_inflight_body_bytes), large inputs are scored
// in slices, and start() makes glibc map every allocation of 1 MiB or more (mallopt
// M_MMAP_THRESHOLD, process-wide) so that a request's large buffers go back to the system when
// it ends.
// Threading: start/stop from one thread; handlers and workers are internal threads.
#pragma once

#include "models/env.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace satrap {

struct model_server_options {
  std::string model_dir;         // a model folder to serve, or
  std::string watch_dir;         // a folder of model folders (newest served)
  std::vector<uint32_t> shards;  // export shards to hold (empty: all): a fleet's partition server
  std::string host = "127.0.0.1";
  uint16_t port = 8500;
  int workers = 0;                                 // scoring threads; 0: one per core
  int http_threads = 64;                           // connections served at once
  int max_batch = 256;                             // instances per scored batch
  std::chrono::microseconds max_queue_delay{500};  // wait for more after the first request
  std::string admin_token;                         // "": POST /admin/reload refused
  size_t max_body_bytes = 8u << 20;                // larger bodies get 413
  // Request bodies read or scored at once (bytes; at least max_body_bytes): past it 503 +
  // Retry-After (http_limits::max_inflight_body_bytes; bodies up to 64 KiB always pass). One
  // largest body at a time: its parsed values take up to 4x its bytes, so the worst bodies under
  // the cap keep the server within 100 MB of idle (tests/security/serve_memory_test.py).
  size_t max_inflight_body_bytes = 8u << 20;
  size_t max_instances = 4096;  // per request
  std::chrono::milliseconds watch_interval{1000};
  std::chrono::milliseconds read_timeout{5000};  // a slow client is cut off after this
  size_t keep_alive_max_requests = 100000;       // per kept-alive connection, then it is closed
  bool lean_http = true;  // runtime/http_server's lean connection loop (http_limits::lean)
  // KServe v2 over gRPC on this port (grpc_service.hpp); 0: none.
  uint16_t grpc_port = 0;
  env* environment = &default_env();  // the clock of load times and latencies
};

class model_server {
 public:
  model_server();
  ~model_server();
  model_server(const model_server&) = delete;
  model_server& operator=(const model_server&) = delete;

  // Loads the model, binds and serves; "" on success, else why not.
  std::string start(const model_server_options& options);
  void stop();
  // The version served now ("" before the first load).
  std::string version() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace satrap
