// A fleet's router (`satrap route`, issue 49): a model too large for one server is split by export
// shard over partition servers (`satrap serve --shards`, model_server.hpp's partition routes), and
// the router answers the same /v1 predict requests as one server would. It holds the model folder's
// meta and dense network only (exported_no_shards), finds at start which server holds each of the
// model's virtual partitions (their GET .../partitions), and per request: parses and checks it
// (both request forms, as `satrap serve`), de-duplicates its ids, asks each partition server for
// the rows of its ids (POST .../rows, one request per server, in parallel, over kept-alive
// connections), pools them and runs the dense network itself (model_scorer::score_rows).
//
// One version: every rows request pins the router's version (X-Satrap-Version); a server that
// serves another answers 409, and the request gets a 503 naming both versions, never a score
// mixed from two versions. A server that does not answer within `timeout` gets its request a
// 503 naming the server and its partitions.
// Threading: start/stop from one thread; requests are handled on the HTTP server's threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace satrap {

struct model_router_options {
  std::string model_dir;             // the model folder (its MODEL.json, job.yaml, dense.bin)
  std::vector<std::string> servers;  // partition servers, host:port each
  std::string host = "127.0.0.1";
  uint16_t port = 8600;
  int http_threads = 64;
  size_t max_body_bytes = 8u << 20;
  size_t max_instances = 4096;
  std::chrono::milliseconds timeout{2000};  // a partition server's answer, at most
  // A request with fewer distinct ids asks its servers one after another on its own thread;
  // with more, in parallel (a thread each).
  size_t parallel_ids = 4096;
};

class model_router {
 public:
  model_router();
  ~model_router();
  model_router(const model_router&) = delete;
  model_router& operator=(const model_router&) = delete;

  // Loads the model, asks every server for its partitions (each partition must be held by one),
  // binds and serves; "" on success, else why not.
  std::string start(const model_router_options& options);
  void stop();
  std::string version() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace satrap
