// JSON lines by the feature schema (data.source jsonl): every kind of feature, shared tables,
// strings and escapes, truncation, weights, and each bad-input case with its reason, column and
// feature name; then the binary cache of a JSON lines file (variable-length bags, weights) under
// both error policies.
#include <doctest/doctest.h>

#include "models/data/batch.hpp"
#include "models/data/dataset_cache.hpp"
#include "models/data/file_source.hpp"
#include "models/data/jsonl_format.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace satrap;
namespace fs = std::filesystem;

namespace {

feature_spec feature(const char* name, feature_kind kind, const char* table = "",
                     int32_t max_length = 0, bool weights = false) {
  feature_spec f;
  f.name = name;
  f.kind = kind;
  f.table = table;
  f.max_length = max_length;
  f.weights = weights;
  return f;
}

// user (id, table user), item (id, table item), hist (sequence of 3, table item), tags (bag of at
// most 4), price (dense), topics (weighted bag).
text_format_options schema() {
  text_format_options o;
  o.format = text_format::jsonl;
  o.features = {feature("user", feature_kind::id),
                feature("item", feature_kind::id),
                feature("hist", feature_kind::sequence, "item", 3),
                feature("tags", feature_kind::bag, "", 4),
                feature("price", feature_kind::dense),
                feature("topics", feature_kind::bag, "", 0, true)};
  o.labels = {"click"};
  return o;
}

const char* good_line =
  R"({"click": 1, "user": 17, "item": "sku-42", "hist": [5, 6, 7, 8, "sku-42"], "tags": [3, 9],)"
  R"( "price": 12.5, "topics": {"ids": [7, 11], "weights": [0.75, 0.25]}, "extra": {"a": [1, {}]}})";

parse_error fails(const std::string& line, const text_format_options& o = schema()) {
  jsonl_parser p(o);
  text_sample s;
  auto e = p.parse(line, s);
  REQUIRE(e.has_value());
  return *e;
}

struct scratch {
  fs::path dir;
  scratch() {
    static int n = 0;
    dir = fs::temp_directory_path()
          / ("satrap-jsonl-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(dir);
  }
  ~scratch() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    auto path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
};

}  // namespace

TEST_CASE("jsonl: a line with every kind of feature, by name, in schema order") {
  auto o = schema();
  jsonl_parser p(o);
  text_sample s;
  REQUIRE_FALSE(p.parse(good_line, s).has_value());
  CHECK(s.label == 1.0f);
  REQUIRE(s.dense.size() == 1);
  CHECK(s.dense[0] == 12.5f);
  // Tables in order of first use: user 0, item 1, tags 2, topics 3.
  const uint64_t sku = feature_string_id_hash(1, "sku-42");
  std::vector<std::pair<int, uint64_t>> want = {
    {0, feature_id_hash(0, 17)},
    {1, sku},
    {2, feature_id_hash(1, 7)},
    {2, feature_id_hash(1, 8)},  // hist: the most recent 3
    {2, sku},
    {3, feature_id_hash(2, 3)},
    {3, feature_id_hash(2, 9)},
    {4, feature_id_hash(3, 7)},
    {4, feature_id_hash(3, 11)}};
  CHECK(s.features == want);
  // Weights: 1 for unweighted features, the topics' own.
  std::vector<float> weights = {1, 1, 1, 1, 1, 1, 1, 0.75f, 0.25f};
  CHECK(s.weights == weights);
}

TEST_CASE("jsonl: features naming one table share its ids, the others do not") {
  auto o = schema();
  jsonl_parser p(o);
  text_sample s;
  REQUIRE_FALSE(p.parse(R"({"click":0,"user":8,"item":8,"hist":[8],"tags":[8],"price":0,)"
                        R"("topics":{"ids":[8],"weights":[1]}})",
                        s)
                  .has_value());
  REQUIRE(s.features.size() == 5);
  CHECK(s.features[1].second == s.features[2].second);  // item and hist: table item
  CHECK(s.features[0].second != s.features[1].second);  // user: its own table
  CHECK(s.features[3].second != s.features[1].second);
  CHECK(s.features[1].second == slot_id_hash(1, 8));  // table k hashes as slot k did
  CHECK(feature_string_id_hash(1, "8") != feature_id_hash(1, 8));
}

TEST_CASE("jsonl: strings with escapes, negative ids, null, empty bags, booleans as labels") {
  auto o = schema();
  jsonl_parser p(o);
  text_sample s;
  REQUIRE_FALSE(p.parse(R"( { "click" : false , "user" : -3 , "item" : "sk\u0075-4\"2" ,)"
                        R"( "hist" : [ ] , "tags" : null , "price" : -1e-2 , "topics" :)"
                        R"( {"weights": [], "ids": []} } )",
                        s)
                  .has_value());
  CHECK(s.label == 0.0f);
  CHECK(s.dense[0] == doctest::Approx(-0.01f));
  REQUIRE(s.features.size() == 2);  // empty bags get their missing id in the cache
  CHECK(s.features[0].second == feature_id_hash(0, static_cast<uint64_t>(int64_t{-3})));
  CHECK(s.features[1].second == feature_string_id_hash(1, "sku-4\"2"));
}

TEST_CASE("jsonl: every bad input names its reason, column and feature") {
  auto check = [](const std::string& line, const char* reason, const char* says) {
    auto e = fails(line);
    INFO(line, " -> ", e.reason, " ", e.expected);
    CHECK(std::string(e.reason) == reason);
    CHECK(e.expected.find(says) != std::string::npos);
  };
  const std::string rest =
    R"("item": 1, "hist": [], "tags": [], "price": 1, "topics": {"ids": [], "weights": []})";
  check(R"({"click": 1, )" + rest + "}", "missing_feature", "'user'");
  check(R"({"user": 1, )" + rest + "}", "missing_label", "'click'");
  check(R"({"click": 1, "user": [1], )" + rest + "}", "wrong_type", "feature 'user'");
  check(R"({"click": 1, "user": 1.5, )" + rest + "}", "wrong_type", "feature 'user'");
  check(R"({"click": 1, "user": 1, "user": 2, )" + rest + "}", "duplicate_key", "'user'");
  check(R"({"click": 2, "user": 1, )" + rest + "}", "bad_label", "'click'");
  check(R"({"click": 1, "user": 1, "item": 1, "hist": [], "tags": [1,2,3,4,5], "price": 1,)"
        R"( "topics": {"ids": [], "weights": []}})",
        "too_long", "at most 4 ids for feature 'tags'");
  check(R"({"click": 1, "user": 1, "item": 1, "hist": [], "tags": [], "price": "x",)"
        R"( "topics": {"ids": [], "weights": []}})",
        "wrong_type", "feature 'price'");
  check(R"({"click": 1, "user": 1, "item": 1, "hist": [], "tags": [], "price": 1,)"
        R"( "topics": [1]})",
        "wrong_type", "feature 'topics'");
  check(R"({"click": 1, "user": 1, "item": 1, "hist": [], "tags": [], "price": 1,)"
        R"( "topics": {"ids": [1, 2], "weights": [1]}})",
        "bad_weights", "same length for feature 'topics'");
  check(R"({"click": 1, "user": 1, "item": 1, "hist": [], "tags": [], "price": 1,)"
        R"( "topics": {"ids": [1], "weights": [1e999]}})",
        "bad_weights", "feature 'topics'");
  check(R"({"click": 1, "user": 1)", "bad_json", "',' or '}'");
  check(R"([1, 2])", "bad_json", "a JSON object");
  check(R"({"click": 1, "user": 1, )" + rest + "} {}", "bad_json", "one object per line");
  check(R"({"click": 1, "user": "a)", "bad_json", "closing");
  check(
    R"({"click": 1, "user": 1, "x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], )"
      + rest + "}",
    "bad_json", "nested");
  // The column is where the problem starts (1-based).
  CHECK(fails(R"({"click": 1, "user": [1], )" + rest + "}").column == 22);
  // A sequence past the hard limit is an error; below it, it is cut to max_length.
  std::string ids = "[0";
  for (int i = 1; i <= feature_ids_max; ++i)
    ids += "," + std::to_string(i);
  ids += "]";
  check(R"({"click": 1, "user": 1, "item": 1, "hist": )" + ids
          + R"(, "tags": [], "price": 1, "topics": {"ids": [], "weights": []}})",
        "too_long", "feature 'hist'");
}

TEST_CASE("jsonl: a JSON lines file through the binary cache: variable bags, weights, errors") {
  scratch dir;
  std::string text;
  for (int i = 0; i < 50; ++i) {
    text += R"({"click": )" + std::to_string(i % 2) + R"(, "user": )" + std::to_string(i)
            + R"(, "item": )" + std::to_string(i % 5) + R"(, "hist": [)";
    for (int k = 0; k < i % 6; ++k)
      text += (k ? "," : "") + std::to_string(k);
    text += R"(], "tags": [], "price": )" + std::to_string(i) + R"(, "topics": {"ids": [1, 2],)"
            + R"( "weights": [)" + std::to_string(i) + R"(, 0.5]}})" + "\n";
  }
  auto good = dir.write("a.jsonl", text);
  dataset_convert_options o;
  o.format = schema();
  o.files = {good};
  o.cache_root = (dir.dir / "cache").string();
  o.chunk_samples = 16;
  auto built = dataset_cache_build(o);
  REQUIRE_MESSAGE(built.ok(), built.error());
  CHECK(built->stats.samples == 50);
  file_source_options fo;
  fo.shuffle = false;
  fo.test_fraction = 0.2;
  auto src = file_source::open(built->dir, "", fo);
  REQUIRE_MESSAGE(src.ok(), src.error());
  CHECK((*src)->slots() == 5);
  CHECK((*src)->dense_features() == 1);
  auto b = (*src)->make_batch(data_split::train, 0, 8);
  REQUIRE(b.weights.size() == b.ids.size());
  for (int i = 0; i < 8; ++i) {
    auto bag = [&](int slot) { return static_cast<size_t>(i * 5 + slot); };
    // hist holds min(i % 6, 3) ids, or its missing id when empty; tags its missing id.
    auto hist = b.offsets[bag(2) + 1] - b.offsets[bag(2)];
    CHECK(hist == static_cast<uint32_t>(std::max(1, std::min(i % 6, 3))));
    CHECK(b.offsets[bag(3) + 1] - b.offsets[bag(3)] == 1);
    CHECK(b.ids[b.offsets[bag(3)]] == missing_id(3));
    CHECK(b.weights[b.offsets[bag(4)]] == static_cast<float>(i));
    CHECK(b.weights[b.offsets[bag(4)] + 1] == 0.5f);
    CHECK(b.weights[b.offsets[bag(0)]] == 1.0f);
    CHECK(b.dense[static_cast<size_t>(i)] == static_cast<float>(i));
    CHECK(b.labels[static_cast<size_t>(i)] == static_cast<float>(i % 2));
  }
  // A changed schema is another data set.
  auto o2 = o;
  o2.format.features[3].max_length = 5;
  auto other = dataset_cache_build(o2);
  REQUIRE(other.ok());
  CHECK(other->dir != built->dir);

  // Bad lines: fail names file:line:column, reason and feature; skip counts each reason.
  auto bad = dir.write("b.jsonl", text.substr(0, text.find('\n') + 1) + R"({"click": 1, "user": 1})"
                                    + "\n" + "not json\n");
  o.files = {bad};
  auto failed = dataset_cache_build(o);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.bad_input());
  CHECK(failed.error().find("b.jsonl:2:") != std::string::npos);
  CHECK(failed.error().find("missing_feature") != std::string::npos);
  CHECK(failed.error().find("'item'") != std::string::npos);
  o.on_error = on_error_policy::skip;
  auto skipped = dataset_cache_build(o);
  REQUIRE_MESSAGE(skipped.ok(), skipped.error());
  CHECK(skipped->stats.samples == 1);
  CHECK(skipped->stats.skipped.at("missing_feature") == 1);
  CHECK(skipped->stats.skipped.at("bad_json") == 1);
}

TEST_CASE("libsvm value_weights: several ids of a field are a bag weighted by their values") {
  scratch dir;
  auto file = dir.write("a.libsvm", "1 0:0.5 3:2 12:1 15:0\n0 1:1 11:-1.5 13:4\n1 2:1\n");
  text_format_options f;
  f.format = text_format::libsvm;
  f.field_starts = {0, 10};
  f.value_weights = true;
  text_sample s;
  REQUIRE_FALSE(parse_text_line("1 0:0.5 3:2 12:1 15:0", f, s).has_value());
  CHECK(s.features
        == std::vector<std::pair<int, uint64_t>>{
          {0, slot_id_hash(0, 0)}, {0, slot_id_hash(0, 3)}, {1, slot_id_hash(1, 12)}});
  CHECK(s.weights == std::vector<float>{0.5f, 2.0f, 1.0f});  // 15:0 is absent, as before
  dataset_convert_options o;
  o.format = f;
  o.files = {file};
  o.cache_root = (dir.dir / "cache").string();
  auto built = dataset_cache_build(o);
  REQUIRE_MESSAGE(built.ok(), built.error());
  file_source_options fo;
  fo.shuffle = false;
  fo.test_fraction = 0.3;  // (the last of 3 samples)
  auto src = file_source::open(built->dir, "", fo);
  REQUIRE_MESSAGE(src.ok(), src.error());
  auto b = (*src)->make_batch(data_split::train, 0, 2);
  CHECK(b.offsets == std::vector<uint32_t>{0, 2, 3, 4, 6});
  CHECK(b.weights == std::vector<float>{0.5f, 2.0f, 1.0f, 1.0f, -1.5f, 4.0f});
  // Without value_weights the same file is another data set, unweighted.
  o.format.value_weights = false;
  auto plain = dataset_cache_build(o);
  REQUIRE(plain.ok());
  CHECK(plain->dir != built->dir);
  auto unweighted = file_source::open(plain->dir, "", fo);
  REQUIRE(unweighted.ok());
  CHECK((*unweighted)->make_batch(data_split::train, 0, 2).weights.empty());
}

TEST_CASE("jsonl: several labels, each a task, through the binary cache") {
  scratch dir;
  auto o = schema();
  o.labels = {"click", "buy"};
  std::string text;
  for (int i = 0; i < 20; ++i)
    text += R"({"buy": )" + std::to_string(i % 4 == 0 ? 1 : 0) + R"(, "click": )"
            + std::to_string(i % 2 == 0 ? 1 : 0) + R"(, "user": )" + std::to_string(i)
            + R"(, "item": 1, "hist": [], "tags": [2], "price": 1, "topics": {"ids": [1],)"
            + R"( "weights": [1]}})" + "\n";
  dataset_convert_options c;
  c.format = o;
  c.files = {dir.write("two.jsonl", text)};
  c.cache_root = (dir.dir / "cache").string();
  c.chunk_samples = 7;
  auto built = dataset_cache_build(c);
  REQUIRE_MESSAGE(built.ok(), built.error());
  CHECK(built->stats.samples == 20);
  file_source_options fo;
  fo.shuffle = false;
  fo.test_fraction = 0.2;
  auto src = file_source::open(built->dir, "", fo);
  REQUIRE_MESSAGE(src.ok(), src.error());
  CHECK((*src)->tasks() == 2);
  auto b = (*src)->make_batch(data_split::train, 0, 12);
  CHECK(b.tasks == 2);
  REQUIRE(b.labels.size() == 24);
  for (int i = 0; i < 12; ++i) {
    CHECK(b.labels[2 * static_cast<size_t>(i)] == (i % 2 == 0 ? 1.0f : 0.0f));
    CHECK(b.labels[2 * static_cast<size_t>(i) + 1] == (i % 4 == 0 ? 1.0f : 0.0f));
  }
  // One label more is another data set; the order of data.labels is the tasks' order.
  auto c1 = c;
  c1.format.labels = {"click"};
  auto one = dataset_cache_build(c1);
  REQUIRE(one.ok());
  CHECK(one->dir != built->dir);
  // A line without the second label names it.
  text_sample s;
  jsonl_parser p(o);
  auto e = p.parse(R"({"click": 1, "user": 1, "item": 1, "hist": [], "tags": [], "price": 1,)"
                   R"( "topics": {"ids": [1], "weights": [1]}})",
                   s);
  REQUIRE(e.has_value());
  CHECK(std::string(e->reason) == "missing_label");
  CHECK(e->expected.find("'buy'") != std::string::npos);
  auto d = p.parse(R"({"click": 1, "buy": 2, "user": 1, "item": 1, "hist": [], "tags": [],)"
                   R"( "price": 1, "topics": {"ids": [1], "weights": [1]}})",
                   s);
  REQUIRE(d.has_value());
  CHECK(std::string(d->reason) == "bad_label");
  CHECK(d->expected.find("'buy'") != std::string::npos);
  // A label named like a feature, or twice, is refused before reading.
  auto twice = o;
  twice.labels = {"click", "click"};
  CHECK_FALSE(text_format_check(twice).ok());
  auto clash = o;
  clash.labels = {"click", "user"};
  CHECK_FALSE(text_format_check(clash).ok());
}
