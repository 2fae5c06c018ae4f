// libFuzzer target of the TFRecord reader's Example parser (models/data/tfrecord_format.hpp):
// the input is one serialized tf.train.Example, parsed with a fixed schema of every kind of
// feature (ids, a bag capped at 4, a sequence of 3 sharing a table, a weighted bag, a dense
// value) and two labels, with one parser for all inputs as the cache does, then added to a cache
// chunk. Never a crash, whatever the bytes; a parsed sample always has labels in {0, 1},
// features in valid slots within their caps, finite weights and dense values; an error always
// names a reason, a column within the record and what was expected. The CRC of the bytes is
// computed too (the framing's check).
// Threading: libFuzzer calls it from one thread.
#include "models/data/chunk_store.hpp"
#include "models/data/tfrecord_format.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

satrap::text_format_options options() {
  satrap::text_format_options o;
  o.format = satrap::text_format::tfrecord;
  auto f = [](const char* name, satrap::feature_kind kind, const char* table, int max_length,
              bool weights) {
    satrap::feature_spec s;
    s.name = name;
    s.kind = kind;
    s.table = table;
    s.max_length = max_length;
    s.weights = weights;
    return s;
  };
  using k = satrap::feature_kind;
  o.features = {f("u", k::id, "", 0, false),        f("i", k::id, "", 0, false),
                f("h", k::sequence, "i", 3, false), f("t", k::bag, "", 4, false),
                f("w", k::bag, "", 0, true),        f("p", k::dense, "", 0, false)};
  o.labels = {"y", "z"};
  return o;
}

void check(bool ok) {
  if (!ok)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto o = options();
  static satrap::tfrecord_example_parser parser(o);
  std::string_view record(reinterpret_cast<const char*>(data), size);
  (void)satrap::tfrecord_masked_crc(record);
  satrap::chunk_builder chunk(satrap::text_format_slots(o), satrap::text_format_dense_features(o),
                              true, 2);
  satrap::text_sample sample;
  if (auto err = parser.parse(record, sample)) {
    check(err->column >= 1 && static_cast<size_t>(err->column) <= size + 1);
    check(*err->reason != '\0' && !err->expected.empty());
    return 0;
  }
  check(sample.label == 0.0f || sample.label == 1.0f);
  check(sample.more_labels.size() == 1
        && (sample.more_labels[0] == 0.0f || sample.more_labels[0] == 1.0f));
  check(sample.dense.size() == 1 && std::isfinite(sample.dense[0]));
  check(sample.weights.size() == sample.features.size());
  for (auto w : sample.weights)
    check(std::isfinite(w));
  int per_slot[5] = {0, 0, 0, 0, 0};
  for (auto& [slot, id] : sample.features) {
    check(slot >= 0 && slot < 5);
    ++per_slot[slot];
  }
  check(per_slot[0] <= 1 && per_slot[1] <= 1 && per_slot[2] <= 3 && per_slot[3] <= 4);
  chunk.add(sample);
  return 0;
}
