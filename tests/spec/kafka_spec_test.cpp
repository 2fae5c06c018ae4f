// data.source kafka in the job spec: data.kafka.* parsed and checked together, errors that name
// the key (a missing broker or topic, a bad start, files beside a stream, a kafka key without the
// source).
#include "runtime/error.hpp"
#include "spec/job_spec.hpp"

#include <doctest/doctest.h>

using namespace satrap;

namespace {

// "" when the text loads and finalizes, else the error.
std::string check(const std::string& yaml, job_spec* out = nullptr) {
  auto spec = job_spec_defaults();
  if (auto err = job_spec_load_text(yaml, "job.yaml", spec))
    return error_text(err);
  if (auto err = job_spec_finalize(spec))
    return error_text(err);
  if (out)
    *out = spec;
  return "";
}

const char* good = R"(
data:
  source: kafka
  kafka: {brokers: "k1:9092,k2:9092", topics: [clicks, views], group: trainers, format: jsonl,
          start: 1733500000000, end: end_offsets, config: [security.protocol=plaintext]}
  features: [{name: user, kind: id}, {name: price, kind: dense}]
  labels: [click]
)";

}  // namespace

TEST_CASE("kafka: data.kafka keys set the stream and its message format") {
  job_spec spec;
  REQUIRE(check(good, &spec) == "");
  auto& k = spec.data.kafka;
  CHECK(spec.data.source == data_source::kafka);
  CHECK(k.brokers == "k1:9092,k2:9092");
  CHECK(k.topics == std::vector<std::string>{"clicks", "views"});
  CHECK(k.group == "trainers");
  CHECK(k.start == kafka_start::timestamp);
  CHECK(k.start_ms == 1733500000000);
  CHECK(k.end == kafka_end::end_offsets);
  REQUIRE(k.config.size() == 1);
  CHECK(k.config[0].first == "security.protocol");
  CHECK(spec.data.format.format == text_format::jsonl);
  CHECK(spec.model.network.slots == 1);
  CHECK(spec.model.network.dense_features == 1);
  // Criteo lines: no features.
  REQUIRE(check("data: {source: kafka, kafka: {brokers: k:1, topics: [t], format: criteo, start: "
                "latest}}",
                &spec)
          == "");
  CHECK(spec.data.format.format == text_format::criteo);
  CHECK(spec.data.kafka.start == kafka_start::latest);
  CHECK(spec.model.network.slots == 26);
}

TEST_CASE("kafka: bad settings are errors naming the key") {
  CHECK(check("data: {source: kafka, kafka: {topics: [t], format: criteo}}")
          .find("data.kafka.brokers: expected the bootstrap brokers")
        != std::string::npos);
  CHECK(check("data: {source: kafka, kafka: {brokers: k:1, format: criteo}}")
          .find("data.kafka.topics: expected at least one topic")
        != std::string::npos);
  CHECK(check("data: {source: kafka, kafka: {brokers: k:1, topics: [t], start: yesterday}}")
          .find("data.kafka.start: expected earliest, latest or a time")
        != std::string::npos);
  CHECK(check("data: {source: kafka, kafka: {brokers: k:1, topics: [t], end: later}}")
          .find("data.kafka.end: expected")
        != std::string::npos);
  CHECK(check("data: {source: kafka, kafka: {brokers: k:1, topics: [t], format: csv}}")
          .find("data.kafka.format: expected")
        != std::string::npos);
  CHECK(check("data: {source: kafka, kafka: {brokers: k:1, topics: [t], config: [nokey]}}")
          .find("data.kafka.config: expected key=value")
        != std::string::npos);
  CHECK(check("data: {source: kafka, kafka: {brokers: k:1, topics: [t], format: criteo}, "
              "train_files: [a.txt]}")
          .find("expected none for data.source kafka")
        != std::string::npos);
  CHECK(check("data: {source: kafka, kafka: {brokers: k:1, topics: [t], format: jsonl}}")
          .find("data.features: expected the named features")
        != std::string::npos);
  CHECK(check("data: {source: synthetic, kafka: {brokers: k:1}}")
          .find("data.kafka.brokers: expected data.source kafka")
        != std::string::npos);
  CHECK(check("data: {source: kafka, kafka: {brokers: k:1, topics: [t], format: criteo, "
              "partitions: 3}}")
          .find("unknown key")
        != std::string::npos);
}
