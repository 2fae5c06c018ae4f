// How fast one loader decodes a Kafka stream (issue 46's "consumption keeps up"): Criteo TSV lines
// from the synthetic teacher (models/data/criteo_writer.hpp) written with kafka_produce into
// librdkafka's mock cluster (TCP on loopback, started here), then read back by a kafka_source in
// batches of the default job's size, one thread, as a loader makes them. Prints the decode rate;
// tests/bench/kafka_bench.sh sets it against the default job's training samples/s in the same go.
// (librdkafka's mock cluster keeps only the newest ~2-3 MB per partition: keep SAMPLES / PARTITIONS
// at about 5000; the program fails when it reads fewer samples than it wrote.)
// usage: kafka_read_bench [SAMPLES=60000] [PARTITIONS=12] [BATCH=512] [FORMAT=criteo|jsonl]
#include "models/data/criteo_writer.hpp"
#include "models/data/kafka_producer.hpp"
#include "models/data/kafka_source.hpp"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using namespace satrap;

int main(int argc, char** argv) {
  const int64_t samples = argc > 1 ? std::atoll(argv[1]) : 60000;
  const int partitions = argc > 2 ? std::atoi(argv[2]) : 12;
  const int batch_size = argc > 3 ? std::atoi(argv[3]) : 512;
  const std::string format = argc > 4 ? argv[4] : "criteo";
  auto dir =
    std::filesystem::temp_directory_path() / ("satrap_kafka_bench_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  criteo_write_options w;
  w.out = dir.string();
  w.train_samples = samples;
  w.test_samples = 1;
  w.files = 1;
  if (auto r = write_criteo_files(w); !r) {
    std::fprintf(stderr, "gen: %s\n", r.error().c_str());
    return 1;
  }
  std::string file = (dir / "train-0.txt").string();
  text_format_options f;
  f.format = text_format::criteo;
  if (format == "jsonl") {  // the same samples as JSON lines: a label, 13 counts, 26 categories
    std::ifstream in(file);
    std::string jfile = (dir / "train.jsonl").string();
    std::ofstream out(jfile);
    std::string line;
    while (std::getline(in, line)) {
      std::string fields[40];
      size_t at = 0;
      for (int k = 0; k < 40; ++k) {
        auto tab = line.find('\t', at);
        fields[k] = line.substr(at, tab == std::string::npos ? std::string::npos : tab - at);
        at = tab == std::string::npos ? line.size() : tab + 1;
      }
      out << "{\"label\": " << fields[0];
      for (int k = 1; k <= 13; ++k)
        out << ", \"i" << k << "\": " << (fields[k].empty() ? "0" : fields[k]);
      for (int k = 14; k < 40; ++k)
        out << ", \"c" << k - 13 << "\": \"" << fields[k] << "\"";
      out << "}\n";
    }
    file = jfile;
    f.format = text_format::jsonl;
    for (int k = 1; k <= 13; ++k) {
      feature_spec s;
      s.name = "i" + std::to_string(k);
      s.kind = feature_kind::dense;
      f.features.push_back(s);
    }
    for (int k = 1; k <= 26; ++k) {
      feature_spec s;
      s.name = "c" + std::to_string(k);
      f.features.push_back(s);
    }
  }
  char err[256];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "log_level", "2", err, sizeof err);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  rd_kafka_mock_cluster_t* mc = rd_kafka_mock_cluster_new(rk, 1);
  rd_kafka_mock_topic_create(mc, "bench", partitions, 1);
  const std::string brokers = rd_kafka_mock_cluster_bootstraps(mc);
  kafka_produce_options p;
  p.brokers = brokers;
  p.topic = "bench";
  p.files = {file};
  auto produced = kafka_produce(p);
  if (!produced) {
    std::fprintf(stderr, "produce: %s\n", produced.error().c_str());
    return 1;
  }
  kafka_options o;
  o.brokers = brokers;
  o.topics = {"bench"};
  o.end = kafka_end::end_offsets;
  o.batch_size = batch_size;
  auto src = kafka_source::open(o, f);
  if (!src) {
    std::fprintf(stderr, "open: %s\n", src.error().c_str());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  int64_t read = 0;
  for (int64_t n = 0; n < src.value()->batches(); ++n)
    read += src.value()->make_batch(data_split::train, n, batch_size).size;
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
    "kafka_read format=%s samples=%lld partitions=%d batch=%d seconds=%.3f "
    "samples_per_sec=%.0f produce_per_sec=%.0f\n",
    format.c_str(), static_cast<long long>(read), partitions, batch_size, s,
    static_cast<double>(read) / s, static_cast<double>(produced->messages) / produced->seconds);
  src.value().reset();
  rd_kafka_mock_cluster_destroy(mc);
  rd_kafka_destroy(rk);
  std::filesystem::remove_all(dir);
  return read == samples ? 0 : 1;
}
