// A Kafka topic as a training stream (`data.source: kafka`, librdkafka). Each message is one
// sample in the job's format: a JSON-lines object, a serialized TFRecord Example, or a Criteo
// TSV line (the parsers of jsonl_format.hpp, tfrecord_format.hpp and text_format.hpp).
//
// Batches stay a pure function of their number, as every batch_source's (batch_source.hpp), so a
// batch number is still a read position and exactly-once recovery needs no loader state: the
// topics' partitions, sorted by (topic, partition), are P streams; training batch n reads
// partition n % P, at offsets [start + (n / P) * B, start + (n / P + 1) * B) of that partition
// (B: the batch size). With an end (end_offsets), a partition whose messages run out leaves the
// rotation and its last batch may be smaller; the layout is computed once. The start offsets
// (earliest, latest or a timestamp) and the end offsets are resolved once, when the job first
// opens the stream, and kept in `positions_file` (checkpoint.dir/kafka-positions.json): every
// later open (the other processes of the job, a resumed job) reads them from there, so all agree.
// Loaders take every L-th batch (data_loader.hpp), so with L dividing P each loader reads its own
// P / L partitions; with more loaders than partitions, loaders share a partition and read
// disjoint offset ranges of it (no loader idles). Offsets missing from a range (a compacted
// topic, transaction markers) leave the batch smaller; so does a malformed message skipped under
// data.on_error: skip (counted, and logged with topic, partition and offset).
//
// The next offsets after the first `batches` batches (a checkpoint's cut) are positions_after;
// commit_group writes them to the consumer group (data.kafka.group), for lag monitoring only.
// Threading: make_batch is const and thread-safe: each partition has its own reader under a mutex
// (loaders reading different partitions do not wait for each other).
#pragma once

#include "models/data/batch_source.hpp"
#include "models/data/text_format.hpp"
#include "models/result.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace satrap {

enum class kafka_start { earliest, latest, timestamp };
enum class kafka_end { none, end_offsets };

struct kafka_options {
  std::string brokers;              // bootstrap servers, host:port[,host:port...]
  std::vector<std::string> topics;  // read in full (every partition)
  std::string group;                // consumer group the checkpointed offsets go to; "": none
  kafka_start start = kafka_start::earliest;
  int64_t start_ms = 0;  // kafka_start::timestamp: the first message at or after this time (ms)
  kafka_end end = kafka_end::none;
  int64_t timeout_ms = 10000;      // a broker's answer (metadata, offsets, a message of a finite
                                   // stream) waited for at most this long (timing.kafka_timeout_ms)
  int64_t lag_interval_ms = 1000;  // the partitions' ends are asked this often, for lag()
                                   // (timing.kafka_lag_interval_ms); 0: never
  bool skip_bad = false;           // data.on_error: skip
  std::string positions_file;      // where the resolved start/end offsets are kept; "": not kept
  int32_t batch_size = 512;        // B of the layout
  // A file each batch made is appended to, as a JSON line {batch, topic, partition, first, last,
  // samples} (offsets [first, last)): which messages went into which batch; "": none.
  std::string trace_file;
  // Extra librdkafka settings (data.kafka.config: "key=value" each), e.g. security.protocol.
  std::vector<std::pair<std::string, std::string>> config;
};

struct kafka_partition {
  std::string topic;
  int32_t partition = 0;
  int64_t start = 0;  // first offset read
  int64_t end = -1;   // first offset not read; -1: unbounded
};

// Per-partition next offsets.
struct kafka_position {
  std::string topic;
  int32_t partition = 0;
  int64_t next = 0;
};

class kafka_source final : public batch_source {
 public:
  // Connects, lists the topics' partitions and resolves (or reads back from positions_file) the
  // start and end offsets. Errors name the key: data.kafka.brokers (no broker answered within the
  // timeout), data.kafka.topics (a topic that does not exist), data.kafka.start.
  static result<std::unique_ptr<kafka_source>> open(const kafka_options& options,
                                                    const text_format_options& format);
  ~kafka_source() override;

  // Training batches only (the stream has no test or validation split). Throws
  // std::runtime_error naming topic, partition and offset for a malformed message under
  // on_error: fail, an offset out of range, or a finite stream's broker silent past the timeout.
  batch make_batch(data_split split, int64_t index, int batch_size) const override;
  // Training: the messages between start and end offsets (-1: unbounded); test/validation: 0.
  int64_t samples(data_split split) const override;
  int slots() const override { return slots_; }
  int dense_features() const override { return dense_; }
  int tasks() const override { return tasks_; }
  bool has_teacher() const override { return false; }
  std::string positions_after(int64_t batches) const override;
  void positions_durable(int64_t batches) const override;
  int64_t stream_lag(int64_t batches) const override { return lag(batches); }

  const std::vector<kafka_partition>& partitions() const { return parts_; }
  // Training batches of a finite stream (end offsets); -1 when unbounded.
  int64_t batches() const { return finite_ ? static_cast<int64_t>(table_.size()) : -1; }
  std::vector<kafka_position> next_offsets(int64_t batches) const;
  // The job's training batches: a batch at or past it (a loader's read-ahead beyond the plan) is
  // empty and reads nothing, so no loader waits on an unbounded stream for a batch never trained.
  void set_batch_limit(int64_t batches) const { limit_ = batches; }
  // Messages skipped under on_error: skip, by reason.
  std::map<std::string, int64_t> skipped() const;
  // Messages between the next offsets after `batches` and the partitions' ends (high watermarks,
  // asked every lag_interval_ms by a thread of the source; a finite stream's ends are its end
  // offsets); -1 until every partition's end is known.
  int64_t lag(int64_t batches) const;

 private:
  struct reader;
  kafka_source() = default;
  // The (partition index, batch within the partition) of training batch n.
  std::pair<int32_t, int64_t> locate(int64_t n) const;
  result<ok_t> resolve(const kafka_options& o);

  kafka_options options_;
  text_format_options format_;
  int slots_ = 0, dense_ = 0, tasks_ = 1;
  bool weighted_ = false;
  void* rk_ = nullptr;         // rd_kafka_t
  std::vector<void*> topics_;  // rd_kafka_topic_t per partition (one per topic, shared)
  std::vector<kafka_partition> parts_;
  bool finite_ = false;
  std::vector<std::pair<int32_t, int64_t>> table_;  // finite: batch n -> (partition, k)
  std::vector<std::unique_ptr<reader>> readers_;
  mutable std::mutex skipped_mu_;
  mutable std::map<std::string, int64_t> skipped_;
  mutable std::atomic<int64_t> limit_{-1};
  // The lag monitor: high watermarks by partition (-1: not yet known).
  std::unique_ptr<std::atomic<int64_t>[]> high_;
  std::thread monitor_;
  std::mutex monitor_mu_;
  std::condition_variable monitor_cv_;
  bool monitor_stop_ = false;
  mutable std::mutex trace_mu_;
  mutable std::FILE* trace_ = nullptr;
  mutable std::mutex commit_mu_;
  mutable void* committer_ = nullptr;  // rd_kafka_t with group.id, made on first commit
};

// The text of a kafka_options' partitions and positions as JSON (positions_file, checkpoints).
std::string kafka_positions_json(const std::vector<kafka_position>& positions);

}  // namespace satrap
