// libFuzzer target of the text readers: every line of the input goes through parse_text_line
// and, when it parses, into a cache chunk. Never a crash, whatever the bytes; a parsed sample
// always has its label in {0, 1}, its features in valid slots and its dense features finite.
// SATRAP_FUZZ_FORMAT picks the reader (0 criteo, 1 libsvm, 2 libffm, 3 jsonl); for libsvm the
// first input byte picks field ranges or slots by position; jsonl reads by a fixed schema of every
// kind of feature (two sharing a table, a weighted bag, a sequence, a capped bag, a dense one),
// with one parser for all lines as the cache does, and checks the weights and truncation too.
// Threading: libFuzzer calls it from one thread.
#include "models/data/chunk_store.hpp"
#include "models/data/jsonl_format.hpp"
#include "models/data/text_format.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#ifndef SATRAP_FUZZ_FORMAT
#error "define SATRAP_FUZZ_FORMAT"
#endif

namespace {

satrap::text_format_options options_for(std::string_view& input) {
  satrap::text_format_options o;
  o.format = static_cast<satrap::text_format>(SATRAP_FUZZ_FORMAT);
  o.slots = 10;
  if (o.format == satrap::text_format::libsvm && !input.empty()) {
    if (input[0] & 1)
      o.field_starts = {0, 957, 5039, 5046, 5053, 5055, 5058, 5060, 5069, 5149};
    input.remove_prefix(1);
  }
  if (o.format == satrap::text_format::jsonl) {
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
    o.labels = {"y"};
  }
  return o;
}

void check(bool ok) {
  if (!ok)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto o = options_for(input);
  const int slots = satrap::text_format_slots(o);
  const bool jsonl = o.format == satrap::text_format::jsonl;
  satrap::chunk_builder chunk(slots, satrap::text_format_dense_features(o), jsonl);
  std::optional<satrap::jsonl_parser> parser;
  if (jsonl)
    parser.emplace(o);
  satrap::text_sample sample;
  while (!input.empty()) {
    auto nl = input.find('\n');
    auto line = input.substr(0, nl);
    input.remove_prefix(nl == std::string_view::npos ? input.size() : nl + 1);
    auto err = parser ? parser->parse(line, sample) : satrap::parse_text_line(line, o, sample);
    if (err) {
      check(err->column >= 1 && static_cast<size_t>(err->column) <= line.size() + 1);
      check(*err->reason != '\0' && !err->expected.empty());
      continue;
    }
    check(sample.label == 0.0f || sample.label == 1.0f);
    check(static_cast<int>(sample.dense.size()) == satrap::text_format_dense_features(o));
    for (auto x : sample.dense)
      check(std::isfinite(x));
    for (auto& [slot, id] : sample.features)
      check(slot >= 0 && slot < slots);
    if (jsonl) {
      check(sample.weights.size() == sample.features.size());
      for (auto w : sample.weights)
        check(std::isfinite(w));
      int per_slot[5] = {0, 0, 0, 0, 0};
      for (auto& [slot, id] : sample.features)
        ++per_slot[slot];
      check(per_slot[0] <= 1 && per_slot[1] <= 1 && per_slot[2] <= 3 && per_slot[3] <= 4);
    }
    chunk.add(sample);
  }
  return 0;
}
