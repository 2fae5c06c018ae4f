// The Kafka stream source against librdkafka's mock cluster (TCP on loopback, started here):
// numbered JSON lines written with kafka_produce (message i to partition i % P) come back in the
// batches the layout says, each exactly once; the next offsets at a cut; the positions kept for
// another open; a malformed message fails with topic, partition and offset, or is skipped and
// counted; an unreachable broker is an error naming its key. (A missing topic, an error naming
// data.kafka.topics on a broker that does not create topics, cannot be tested here: the mock
// cluster creates every topic asked for.)
#include <doctest/doctest.h>

#include "models/data/kafka_producer.hpp"
#include "models/data/kafka_source.hpp"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

using namespace satrap;
namespace fs = std::filesystem;

namespace {

// A mock cluster with one topic, for one test.
struct mock_cluster {
  rd_kafka_t* rk = nullptr;
  rd_kafka_mock_cluster_t* mc = nullptr;
  std::string brokers;
  mock_cluster(const char* topic, int partitions) {
    char err[256];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "2", err, sizeof err);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    REQUIRE(rk != nullptr);
    mc = rd_kafka_mock_cluster_new(rk, 1);
    REQUIRE(mc != nullptr);
    REQUIRE(rd_kafka_mock_topic_create(mc, topic, partitions, 1) == RD_KAFKA_RESP_ERR_NO_ERROR);
    brokers = rd_kafka_mock_cluster_bootstraps(mc);
  }
  ~mock_cluster() {
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(rk);
  }
};

struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path()
           / ("satrap_kafka_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

text_format_options numbered_format() {
  text_format_options o;
  o.format = text_format::jsonl;
  feature_spec n;
  n.name = "n";
  n.kind = feature_kind::dense;
  feature_spec user;
  user.name = "user";
  user.kind = feature_kind::id;
  o.features = {n, user};
  o.labels = {"label"};
  return o;
}

// Lines numbered first..last-1, with malformed lines at the numbers in `bad`.
std::string write_lines(const fs::path& dir, int first, int last, std::set<int> bad = {}) {
  auto path = (dir / ("lines-" + std::to_string(first) + ".jsonl")).string();
  std::ofstream out(path);
  for (int i = first; i < last; ++i) {
    if (bad.count(i))
      out << "{\"label\": 1, \"n\": " << i << "}\n";  // no user: missing_feature
    else
      out << "{\"label\": " << (i % 3 == 0) << ", \"n\": " << i << ", \"user\": " << i % 7 << "}\n";
  }
  return path;
}

void produce(const mock_cluster& c, const std::string& topic, const std::string& file) {
  kafka_produce_options p;
  p.brokers = c.brokers;
  p.topic = topic;
  p.files = {file};
  auto r = kafka_produce(p);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error()));
}

kafka_options stream(const mock_cluster& c, const char* topic, int batch_size) {
  kafka_options o;
  o.brokers = c.brokers;
  o.topics = {topic};
  o.end = kafka_end::end_offsets;
  o.batch_size = batch_size;
  o.timeout_ms = 5000;
  return o;
}

// The numbers (dense feature n) of a batch.
std::vector<int> numbers(const batch& b) {
  std::vector<int> out;
  for (int i = 0; i < b.size; ++i)
    out.push_back(static_cast<int>(b.dense[static_cast<size_t>(i * b.dense_features)]));
  return out;
}

}  // namespace

TEST_CASE("kafka: every message is in exactly one batch, at the offsets the layout says") {
  mock_cluster c("clicks", 3);
  temp_dir dir;
  const int n = 1000, b = 64;
  produce(c, "clicks", write_lines(dir.path, 0, n));
  auto opened = kafka_source::open(stream(c, "clicks", b), numbered_format());
  REQUIRE_MESSAGE(opened.ok(), (opened.ok() ? "" : opened.error()));
  auto& src = *opened.value();
  CHECK(src.partitions().size() == 3);
  CHECK(src.samples(data_split::train) == n);
  CHECK(src.samples(data_split::test) == 0);
  CHECK(src.slots() == 1);
  CHECK(src.dense_features() == 1);
  // Partition sizes 334, 333, 333: 6 batches each (the last of each smaller).
  REQUIRE(src.batches() == 18);
  std::multiset<int> seen;
  for (int64_t k = 0; k < src.batches(); ++k) {
    auto batch = src.make_batch(data_split::train, k, b);
    CHECK(batch.index == k);
    CHECK(batch.size == (k < 15 ? b : (k == 15 ? 334 - 5 * b : 333 - 5 * b)));
    CHECK(batch.offsets.size() == static_cast<size_t>(batch.size) + 1);
    CHECK(batch.labels.size() == static_cast<size_t>(batch.size));
    auto ns = numbers(batch);
    // Batch k reads partition k % 3, whose j-th message is number j * 3 + partition.
    const int part = static_cast<int>(k % 3);
    for (size_t i = 0; i < ns.size(); ++i)
      CHECK(ns[i] == static_cast<int>(((k / 3) * b + static_cast<int64_t>(i)) * 3 + part));
    seen.insert(ns.begin(), ns.end());
  }
  CHECK(seen.size() == static_cast<size_t>(n));
  CHECK(*seen.begin() == 0);
  CHECK(*seen.rbegin() == n - 1);
  CHECK(std::set<int>(seen.begin(), seen.end()).size() == seen.size());  // none twice
  // Out of order, and again: a batch is a pure function of its number (the reader seeks).
  CHECK(numbers(src.make_batch(data_split::train, 4, b))
        == numbers(src.make_batch(data_split::train, 4, b)));
  CHECK(numbers(src.make_batch(data_split::train, 1, b)).front() == 1);
  // Past the stream's end: an empty batch that reads nothing.
  CHECK(src.make_batch(data_split::train, 18, b).size == 0);
  // The next offsets after 7 batches (partitions 0 1 2 0 1 2 0): 3 batches of partition 0, two
  // of the others.
  auto next = src.next_offsets(7);
  REQUIRE(next.size() == 3);
  CHECK(next[0].next == 3 * b);
  CHECK(next[1].next == 2 * b);
  CHECK(next[2].next == 2 * b);
  CHECK(src.next_offsets(18)[0].next == 334);
  CHECK(src.positions_after(1).find("\"next\":64") != std::string::npos);
  src.set_batch_limit(5);
  CHECK(src.make_batch(data_split::train, 5, b).size == 0);
}

TEST_CASE("kafka: the resolved positions are kept, so a later open reads the same layout") {
  mock_cluster c("events", 2);
  temp_dir dir;
  produce(c, "events", write_lines(dir.path, 0, 100));
  auto o = stream(c, "events", 16);
  o.start = kafka_start::latest;
  o.end = kafka_end::none;
  o.positions_file = (dir.path / "ckpt" / "kafka-positions.json").string();
  auto first = kafka_source::open(o, numbered_format());
  REQUIRE_MESSAGE(first.ok(), (first.ok() ? "" : first.error()));
  CHECK(first.value()->partitions()[0].start == 50);  // latest: after the 50 already there
  CHECK(first.value()->samples(data_split::train) == -1);
  CHECK(first.value()->batches() == -1);
  produce(c, "events", write_lines(dir.path, 100, 164));
  // Reopened (a resumed job): the same start, not the new latest.
  auto again = kafka_source::open(o, numbered_format());
  REQUIRE(again.ok());
  CHECK(again.value()->partitions()[0].start == 50);
  CHECK(again.value()->partitions()[1].start == 50);
  // The unbounded stream's batch 1: partition 1 from offset 50, numbers 101, 103, ...
  auto b1 = numbers(again.value()->make_batch(data_split::train, 1, 16));
  REQUIRE(b1.size() == 16);
  CHECK(b1[0] == 101);
  CHECK(b1[15] == 131);
  auto other = o;
  other.topics = {"other"};
  auto wrong = kafka_source::open(other, numbered_format());
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().find("data.kafka.topics") != std::string::npos);
}

TEST_CASE("kafka: a malformed message fails naming topic, partition and offset, or is skipped") {
  mock_cluster c("bad", 2);
  temp_dir dir;
  produce(c, "bad", write_lines(dir.path, 0, 40, {5}));  // number 5: partition 1, offset 2
  auto o = stream(c, "bad", 8);
  {
    auto src = kafka_source::open(o, numbered_format());
    REQUIRE(src.ok());
    CHECK(src.value()->make_batch(data_split::train, 0, 8).size == 8);
    try {
      (void)src.value()->make_batch(data_split::train, 1, 8);
      FAIL("a malformed message was trained on");
    } catch (const std::runtime_error& e) {
      std::string what = e.what();
      CHECK(what.find("topic 'bad' partition 1 offset 2") != std::string::npos);
      CHECK(what.find("missing_feature") != std::string::npos);
      CHECK(what.find("user") != std::string::npos);
    }
  }
  o.skip_bad = true;
  auto src = kafka_source::open(o, numbered_format());
  REQUIRE(src.ok());
  auto b1 = numbers(src.value()->make_batch(data_split::train, 1, 8));
  CHECK(b1 == std::vector<int>{1, 3, 7, 9, 11, 13, 15});
  CHECK(src.value()->skipped().at("missing_feature") == 1);
}

TEST_CASE("kafka: an unreachable broker is an error naming the key and the timeout knob") {
  kafka_options o;
  o.brokers = "127.0.0.1:1";  // nothing listens on port 1
  o.topics = {"t"};
  o.timeout_ms = 300;
  auto r = kafka_source::open(o, numbered_format());
  REQUIRE_FALSE(r.ok());
  CHECK(r.bad_input());
  CHECK(r.error().find("data.kafka.brokers") != std::string::npos);
  CHECK(r.error().find("timing.kafka_timeout_ms") != std::string::npos);
}
