// `satrap produce`: writes text lines or TFRecord records into a Kafka topic at a given rate
// (models/data/kafka_producer.hpp), so a stream job (data.source: kafka) can be tried, tested and
// measured. Prints how many messages went to how many partitions, and the rate reached.
// Threading: runs on the calling thread.
#pragma once

#include "models/data/kafka_producer.hpp"

#include "cli/command.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace satrap {

class produce_command final : public command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  kafka_produce_options options_;
  std::vector<std::string> config_;  // key=value
};

}  // namespace satrap
