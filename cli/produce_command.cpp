#include "cli/produce_command.hpp"

#include "cli/exit_status.hpp"

#include <cstdio>
#include <iostream>

namespace satrap {

void produce_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand(
    "produce",
    "Write the lines of text files (JSON lines, Criteo TSV) or the records of TFRecord files "
    "into a Kafka topic, one message each, message i to partition i % partitions");
  auto& o = options_;
  sub_->add_option("--brokers", o.brokers, "bootstrap brokers, host:port[,host:port...]")
    ->required();
  sub_->add_option("--topic", o.topic, "the topic (must exist)")->required();
  sub_->add_option("files", o.files, "files to send, in order")->required();
  sub_->add_flag("--tfrecord", o.tfrecord, "the files are TFRecord (one Example per message)");
  sub_->add_option("--rate", o.rate, "messages per second; 0: as fast as the brokers take them")
    ->capture_default_str()
    ->check(CLI::Range(0.0, 1e9));
  sub_->add_option("--limit", o.limit, "at most this many messages; -1: all")
    ->capture_default_str()
    ->check(CLI::Range(int64_t{-1}, int64_t{1} << 50));
  sub_->add_option("--repeat", o.repeat, "passes over the files")
    ->capture_default_str()
    ->check(CLI::Range(1, 1 << 20));
  sub_->add_option("--timeout-ms", o.timeout_ms, "the brokers' answer, ms")
    ->capture_default_str()
    ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  sub_->add_option("--config", config_, "extra librdkafka settings, key=value (repeats)");
}

int produce_command::run() {
  auto& o = options_;
  for (auto& c : config_) {
    auto eq = c.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "satrap produce: --config: expected key=value, got '" << c << "'\n";
      return exit_bad_input;
    }
    o.config.emplace_back(c.substr(0, eq), c.substr(eq + 1));
  }
  auto done = kafka_produce(o);
  if (!done) {
    std::cerr << "satrap " << done.error() << "\n";
    return done.bad_input() ? exit_bad_input : exit_failed;
  }
  std::printf("produced %lld messages to %d partitions of %s in %.2f s (%.0f messages/s)\n",
              static_cast<long long>(done->messages), done->partitions, o.topic.c_str(),
              done->seconds,
              done->seconds > 0 ? static_cast<double>(done->messages) / done->seconds : 0.0);
  return 0;
}

}  // namespace satrap
