// The serving commands: `satrap export` (a checkpoint -> a model folder), `satrap predict` (score
// files with a model folder) and `satrap serve` (HTTP/JSON predictions, serving/model_server.hpp).
// The formats and the scorer are models/serving/, exporting and scoring a split serving/
// (model_export.hpp, batch_scoring.hpp); these parse flags, read specs and print.
// Threading: each runs on the calling thread (serve: until SIGINT/SIGTERM).
#pragma once

#include "cli/command.hpp"
#include "cli/job_options.hpp"
#include "spec/job_spec.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace satrap {

class export_command final : public command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  job_options job_;
  std::string checkpoint_, out_, version_;
  uint32_t shards_ = 1;
};

class predict_command final : public command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  std::string model_, format_, out_, instances_, log_level_ = "warn";
  std::vector<std::string> data_;
  bool json_ = false;
  int batch_ = 0;
};

class serve_command final : public command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  std::string model_, watch_, host_ = "127.0.0.1", token_file_, log_level_ = "info";
  uint16_t port_ = 8500;
  uint16_t grpc_port_ = 0;  // 0: no gRPC
  int threads_ = 0, http_threads_ = 64, max_batch_ = 256;
  double max_delay_ms_ = 0.5;
  double watch_s_ = 1.0;
  size_t max_body_mb_ = 8;
  std::vector<uint32_t> shards_;  // --shards: a fleet's partition server
};

// `satrap route`: a fleet's router in front of partition servers (serving/model_router.hpp).
class route_command final : public command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  std::string model_, host_ = "127.0.0.1", log_level_ = "info";
  std::vector<std::string> servers_;
  uint16_t port_ = 8600;
  int http_threads_ = 64;
  size_t max_body_mb_ = 8;
  int timeout_ms_ = 2000;
};

}  // namespace satrap
