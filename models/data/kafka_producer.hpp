// Writes a stream into a Kafka topic (`satrap produce`): the lines of text files (JSON lines,
// Criteo TSV: one message per line) or the records of TFRecord files (one serialized Example per
// message), at a given rate. Message i goes to partition i % P (P: the topic's partitions), so a
// file's layout over the partitions is known (tests check exactly-once training against it).
// Threading: runs on the calling thread.
#pragma once

#include "models/result.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace satrap {

struct kafka_produce_options {
  std::string brokers;             // bootstrap servers
  std::string topic;               // must exist
  std::vector<std::string> files;  // read in order, each in full (gzip allowed for TFRecord)
  bool tfrecord = false;           // files are TFRecord (else text lines)
  double rate = 0.0;               // messages per second; 0: as fast as the brokers take them
  int64_t limit = -1;              // at most this many messages (-1: all)
  int repeat = 1;                  // passes over the files
  int64_t timeout_ms = 10000;      // metadata and the final flush (timing.kafka_timeout_ms)
  std::vector<std::pair<std::string, std::string>> config;  // extra librdkafka settings
};

struct kafka_produce_summary {
  int64_t messages = 0;  // delivered (acknowledged by the brokers)
  int32_t partitions = 0;
  double seconds = 0.0;
};

// An error names what failed: the brokers (unreachable within the timeout), the topic, a file,
// or messages the brokers did not acknowledge.
result<kafka_produce_summary> kafka_produce(const kafka_produce_options& options);

}  // namespace satrap
