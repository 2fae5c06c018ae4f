// TFRecord of tf.train.Example (models/data/tfrecord_format.hpp): CRC-32C against its published
// check value, the framing's errors, and the Example parser on hand-encoded protobuf (packed and
// unpacked lists, bytes and int64 ids, weights, labels) with each bad-input case. The end-to-end
// test with Google's protobuf as the writer is tests/cli/tfrecord_end_to_end.py.
#include "models/data/jsonl_format.hpp"
#include "models/data/tfrecord_format.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

using namespace satrap;

namespace {

std::string varint(uint64_t v) {
  std::string o;
  do {
    uint8_t c = v & 0x7f;
    v >>= 7;
    o.push_back(static_cast<char>(c | (v ? 0x80 : 0)));
  } while (v);
  return o;
}
std::string ld(int field, const std::string& body) {  // a length-delimited field
  return varint(static_cast<uint64_t>(field) << 3 | 2) + varint(body.size()) + body;
}
std::string entry(const std::string& key, const std::string& feature) {
  return ld(1, ld(1, key) + ld(2, feature));
}
std::string int64s_packed(std::initializer_list<int64_t> v) {
  std::string p;
  for (auto x : v)
    p += varint(static_cast<uint64_t>(x));
  return ld(3, ld(1, p));
}
std::string int64s_unpacked(std::initializer_list<int64_t> v) {
  std::string p;
  for (auto x : v)
    p += varint(1 << 3) + varint(static_cast<uint64_t>(x));
  return ld(3, p);
}
std::string floats(std::initializer_list<float> v) {
  std::string p;
  for (auto x : v) {
    char b[4];
    std::memcpy(b, &x, 4);
    p.append(b, 4);
  }
  return ld(2, ld(1, p));
}
std::string bytes(std::initializer_list<const char*> v) {
  std::string p;
  for (auto x : v)
    p += ld(1, x);
  return ld(1, p);
}
std::string example(const std::string& entries) { return ld(1, entries); }

feature_spec feature(const char* name, feature_kind kind, const char* table = "", int max = 0,
                     bool weights = false) {
  feature_spec f;
  f.name = name;
  f.kind = kind;
  f.table = table;
  f.max_length = max;
  f.weights = weights;
  return f;
}

text_format_options schema(text_format format = text_format::tfrecord) {
  text_format_options o;
  o.format = format;
  o.features = {feature("user", feature_kind::id), feature("item", feature_kind::id),
                feature("hist", feature_kind::sequence, "item", 2),
                feature("tags", feature_kind::bag, "", 3),
                feature("topics", feature_kind::bag, "", 0, true),
                feature("price", feature_kind::dense)};
  o.labels = {"click", "buy"};
  return o;
}

std::string good_entries() {
  return entry("click", int64s_packed({1})) + entry("buy", floats({0.0f}))
         + entry("user", int64s_unpacked({17})) + entry("item", bytes({"sku-42"}))
         + entry("hist", int64s_packed({5, 6, 7})) + entry("tags", int64s_packed({}))
         + entry("topics", int64s_packed({7, 11}))
         + entry("topics_weights", floats({0.75f, 0.25f})) + entry("price", floats({12.5f}))
         + entry("other", bytes({"x"}));
}

std::string framed(const std::string& payload) {
  std::string head(8, '\0');
  uint64_t n = payload.size();
  std::memcpy(head.data(), &n, 8);
  auto put = [](std::string& s, uint32_t c) {
    char b[4];
    std::memcpy(b, &c, 4);
    s.append(b, 4);
  };
  std::string out = head;
  put(out, tfrecord_masked_crc(head));
  out += payload;
  put(out, tfrecord_masked_crc(payload));
  return out;
}

}  // namespace

TEST_CASE("crc32c: the standard check value, and TFRecord's mask") {
  CHECK(crc32c("123456789") == 0xe3069283u);
  CHECK(crc32c("") == 0u);
  CHECK(tfrecord_masked_crc("") == 0xa282ead8u);
}

TEST_CASE("tfrecord: an Example's features by name, as JSON lines gives them") {
  tfrecord_example_parser p(schema());
  text_sample s;
  auto e = p.parse(example(good_entries()), s);
  REQUIRE_MESSAGE(!e, (e ? std::string(e->reason) + " " + e->expected : ""));
  CHECK(s.label == 1.0f);
  REQUIRE(s.more_labels.size() == 1);
  CHECK(s.more_labels[0] == 0.0f);
  CHECK(s.dense == std::vector<float>{12.5f});
  // The same sample as a JSON line: the same slots, ids (bytes ids hash as string ids) and weights.
  auto jo = schema(text_format::jsonl);
  jsonl_parser j(jo);
  text_sample t;
  REQUIRE_FALSE(j.parse(R"({"click": 1, "buy": 0, "user": 17, "item": "sku-42", "hist": [5, 6, 7],)"
                        R"( "tags": [], "topics": {"ids": [7, 11], "weights": [0.75, 0.25]},)"
                        R"( "price": 12.5})",
                        t));
  CHECK(s.features == t.features);
  CHECK(s.weights == t.weights);
  // hist keeps its 2 most recent ids; the empty bag is the slot's missing id (no entry).
  int hist = 0;
  for (auto& [slot, id] : s.features)
    hist += slot == 2;
  CHECK(hist == 2);
}

TEST_CASE("tfrecord: every bad Example names its reason and feature") {
  tfrecord_example_parser p(schema());
  text_sample s;
  auto fails = [&](const std::string& record) {
    auto e = p.parse(record, s);
    REQUIRE(e.has_value());
    CHECK(e->column >= 1);
    CHECK(static_cast<size_t>(e->column) <= record.size() + 1);
    return std::string(e->reason) + ": " + e->expected;
  };
  auto without = [&](const std::string& key, const std::string& replacement = "") {
    auto all = good_entries();
    std::string out;
    for (auto [k, v] : std::initializer_list<std::pair<const char*, std::string>>{
           {"click", entry("click", int64s_packed({1}))},
           {"buy", entry("buy", floats({0.0f}))},
           {"user", entry("user", int64s_unpacked({17}))},
           {"item", entry("item", bytes({"sku-42"}))},
           {"hist", entry("hist", int64s_packed({5, 6, 7}))},
           {"tags", entry("tags", int64s_packed({}))},
           {"topics", entry("topics", int64s_packed({7, 11}))},
           {"topics_weights", entry("topics_weights", floats({0.75f, 0.25f}))},
           {"price", entry("price", floats({12.5f}))}})
      out += key == k ? replacement : v;
    return example(out);
  };
  CHECK(fails(without("item")) == "missing_feature: the feature 'item'");
  CHECK(fails(without("buy")) == "missing_label: the label 'buy'");
  CHECK(fails(without("buy", entry("buy", int64s_packed({2})))) == "bad_label: the label 'buy': 0 or 1");
  CHECK(fails(without("user", entry("user", int64s_packed({1, 2})))).find("too_long: one id")
        == 0);
  CHECK(fails(without("tags", entry("tags", int64s_packed({1, 2, 3, 4}))))
        == "too_long: at most 3 ids for feature 'tags'");
  CHECK(fails(without("user", entry("user", floats({1.0f})))).find("wrong_type") == 0);
  CHECK(fails(without("price", entry("price", bytes({"12"})))).find("wrong_type") == 0);
  CHECK(fails(without("topics_weights")).find("bad_weights") == 0);
  CHECK(fails(without("topics_weights", entry("topics_weights", floats({1.0f}))))
        .find("one weight per id (2 ids, 1 weights)")
        != std::string::npos);
  CHECK(fails("\xff\xff\xff").find("bad_example") == 0);
  CHECK(fails(ld(1, std::string("\x0a\x05", 2))).find("bad_example") == 0);  // cut entry
}

TEST_CASE("tfrecord: the framing's CRCs are checked, a cut file is truncated") {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("satrap-tfrecord-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& data) {
    auto path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << data;
    return path;
  };
  auto one = framed(example(good_entries())), two = framed("abc");
  std::string_view r;
  {
    tfrecord_reader in(write("good", one + two));
    REQUIRE(in.next(r));
    CHECK(r == example(good_entries()));
    REQUIRE(in.next(r));
    CHECK(r == "abc");
    CHECK(in.record_number() == 2);
    CHECK_FALSE(in.next(r));
    CHECK(in.error().empty());  // a clean end
  }
  {
    auto bad = one + two;
    bad[one.size() + 13] ^= 1;  // record 2's data
    tfrecord_reader in(write("flip", bad));
    REQUIRE(in.next(r));
    CHECK_FALSE(in.next(r));
    CHECK(in.error() == "bad_crc: record 2's data fails its CRC");
  }
  {
    auto bad = one + two;
    bad[one.size() + 2] ^= 1;  // record 2's length
    tfrecord_reader in(write("len", bad));
    REQUIRE(in.next(r));
    CHECK_FALSE(in.next(r));
    CHECK(in.error() == "bad_crc: record 2's length fails its CRC");
  }
  {
    tfrecord_reader in(write("cut", (one + two).substr(0, one.size() + 14)));
    REQUIRE(in.next(r));
    CHECK_FALSE(in.next(r));
    CHECK(in.error() == "truncated: the file ends inside record 2");
  }
  fs::remove_all(dir);
}
