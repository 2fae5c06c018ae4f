// The text line parsers: good lines of every format, and every malformed case we could think of,
// each with its reason and column.
#include <doctest/doctest.h>

#include "models/data/batch.hpp"
#include "models/data/text_format.hpp"

#include <cmath>
#include <string>

using namespace satrap;

namespace {

text_format_options libsvm_positional(int slots) {
  text_format_options o;
  o.format = text_format::libsvm;
  o.slots = slots;
  return o;
}

text_format_options libsvm_fields() {
  text_format_options o;
  o.format = text_format::libsvm;
  o.field_starts = {0, 10, 20};
  return o;
}

text_format_options libffm(int slots) {
  text_format_options o;
  o.format = text_format::libffm;
  o.slots = slots;
  return o;
}

text_format_options criteo() {
  text_format_options o;
  o.format = text_format::criteo;
  return o;
}

// A Criteo line with the given label, dense and category fields.
std::string criteo_line(const std::string& label, const std::string& dense,
                        const std::string& category) {
  std::string line = label;
  for (int i = 0; i < criteo_dense_features; ++i)
    line += "\t" + dense;
  for (int i = 0; i < criteo_categories; ++i)
    line += "\t" + category;
  return line;
}

// The error of a line that must fail.
parse_error fails(const std::string& line, const text_format_options& o) {
  text_sample s;
  auto e = parse_text_line(line, o, s);
  REQUIRE(e.has_value());
  return *e;
}

}  // namespace

TEST_CASE("libsvm: labels -1/0/1 in any spelling, features by field ranges") {
  text_sample s;
  auto o = libsvm_fields();
  REQUIRE_FALSE(parse_text_line("1 3:1 12:1 25:1", o, s));
  CHECK(s.label == 1.0f);
  REQUIRE(s.features.size() == 3);
  CHECK(s.features[0] == std::pair<int, uint64_t>{0, slot_id_hash(0, 3)});
  CHECK(s.features[1] == std::pair<int, uint64_t>{1, slot_id_hash(1, 12)});
  CHECK(s.features[2] == std::pair<int, uint64_t>{2, slot_id_hash(2, 25)});
  CHECK(s.dense == std::vector<float>{1.0f});
  for (auto label : {"-1", "0", "-1.0", "0.0"}) {
    REQUIRE_FALSE(parse_text_line(std::string(label) + " 1:1", o, s));
    CHECK(s.label == 0.0f);
  }
  for (auto label : {"1", "+1", "1.0", "+1.000"}) {
    REQUIRE_FALSE(parse_text_line(std::string(label) + " 1:1", o, s));
    CHECK(s.label == 1.0f);
  }
}

TEST_CASE("libsvm: CRLF, tabs, a value 0 drops the feature, a label alone is a sample") {
  text_sample s;
  auto o = libsvm_positional(3);
  REQUIRE_FALSE(parse_text_line("-1 5:1\t7:0.5  9:0\r", o, s));
  CHECK(s.label == 0.0f);
  REQUIRE(s.features.size() == 2);
  CHECK(s.features[0].first == 0);
  CHECK(s.features[1].first == 1);
  REQUIRE_FALSE(parse_text_line("1", o, s));
  CHECK(s.features.empty());
}

TEST_CASE("libsvm: malformed lines name the reason and column") {
  auto o = libsvm_fields();
  auto e = fails("2 1:1", o);
  CHECK(std::string(e.reason) == "bad_label");
  CHECK(e.column == 1);
  CHECK(e.expected == "a label -1, 0 or 1");
  CHECK(std::string(fails("", o).reason) == "bad_label");
  CHECK(std::string(fails("abc 1:1", o).reason) == "bad_label");
  CHECK(std::string(fails("nan 1:1", o).reason) == "bad_label");
  e = fails("1 3:1 12", o);
  CHECK(std::string(e.reason) == "bad_feature");
  CHECK(e.column == 7);
  CHECK(std::string(fails("1 x:1", o).reason) == "bad_index");
  CHECK(std::string(fails("1 -3:1", o).reason) == "bad_index");
  CHECK(std::string(fails("1 :1", o).reason) == "bad_index");
  CHECK(std::string(fails("1 99999999999999999999:1", o).reason) == "bad_index");
  e = fails("1 3:abc", o);
  CHECK(std::string(e.reason) == "bad_value");
  CHECK(e.column == 5);
  CHECK(std::string(fails("1 3:", o).reason) == "bad_value");
  CHECK(std::string(fails("1 3:inf", o).reason) == "bad_value");
  CHECK(std::string(fails("1 3:1:1", o).reason) == "bad_value");
  auto shifted = o;
  shifted.field_starts = {5, 10};
  e = fails("1 3:1", shifted);
  CHECK(std::string(e.reason) == "index_out_of_range");
  CHECK(std::string(fails("1 1:1 2:1 3:1 4:1", libsvm_positional(3)).reason)
        == "too_many_features");
  CHECK(std::string(fails(std::string(text_line_bytes_max + 1, '1'), o).reason) == "line_too_long");
}

TEST_CASE("libffm: the field is the slot") {
  text_sample s;
  auto o = libffm(4);
  REQUIRE_FALSE(parse_text_line("0 0:17:1 3:5:1 3:6:2\r", o, s));
  REQUIRE(s.features.size() == 3);
  CHECK(s.features[0] == std::pair<int, uint64_t>{0, slot_id_hash(0, 17)});
  CHECK(s.features[2] == std::pair<int, uint64_t>{3, slot_id_hash(3, 6)});
  CHECK(std::string(fails("1 4:1:1", o).reason) == "bad_field");
  CHECK(std::string(fails("1 a:1:1", o).reason) == "bad_field");
  CHECK(std::string(fails("1 1:1", o).reason) == "bad_feature");
  auto e = fails("1 1:z:1", o);
  CHECK(std::string(e.reason) == "bad_index");
  CHECK(e.column == 5);
  CHECK(std::string(fails("1 1:2:x", o).reason) == "bad_value");
}

TEST_CASE("criteo: log(1+x) counts, hexadecimal categories, empty fields get missing ids") {
  text_sample s;
  auto o = criteo();
  REQUIRE_FALSE(parse_text_line(criteo_line("1", "3", "68fd1e64"), o, s));
  CHECK(s.label == 1.0f);
  REQUIRE(s.dense.size() == 13);
  CHECK(s.dense[0] == doctest::Approx(std::log1p(3.0)));
  REQUIRE(s.features.size() == 26);
  CHECK(s.features[25] == std::pair<int, uint64_t>{25, slot_id_hash(25, 0x68fd1e64)});
  REQUIRE_FALSE(parse_text_line(criteo_line("0", "", "") + "\r", o, s));
  CHECK(s.dense[5] == 0.0f);
  CHECK(s.features[7] == std::pair<int, uint64_t>{7, missing_id(7)});
  CHECK(missing_id(7) != missing_id(8));
  REQUIRE_FALSE(parse_text_line(criteo_line("0", "-2", "a"), o, s));
  CHECK(s.dense[0] == 0.0f);
}

TEST_CASE("criteo: malformed lines") {
  auto o = criteo();
  auto e = fails(criteo_line("2", "1", "a"), o);
  CHECK(std::string(e.reason) == "bad_label");
  CHECK(std::string(fails(criteo_line("", "1", "a"), o).reason) == "bad_label");
  e = fails(criteo_line("1", "1.5", "a"), o);
  CHECK(std::string(e.reason) == "bad_integer");
  CHECK(e.column == 3);
  CHECK(std::string(fails(criteo_line("1", "-", "a"), o).reason) == "bad_integer");
  CHECK(std::string(fails(criteo_line("1", "1", "xyz"), o).reason) == "bad_category");
  CHECK(std::string(fails(criteo_line("1", "1", "12345678901234567"), o).reason) == "bad_category");
  CHECK(std::string(fails(criteo_line("1", "1", "-1"), o).reason) == "bad_category");
  e = fails("1\t2\t3", o);
  CHECK(std::string(e.reason) == "too_few_fields");
  CHECK(e.column == 6);
  CHECK(e.expected == "40 tab-separated fields, got 3");
  e = fails(criteo_line("1", "1", "a") + "\tff", o);
  CHECK(std::string(e.reason) == "too_many_fields");
  CHECK(std::string(fails("1 2 3", o).reason) == "bad_label");
}

TEST_CASE("format options are checked") {
  CHECK(text_format_check(libsvm_fields()).ok());
  CHECK(text_format_check(libsvm_positional(3)).ok());
  CHECK_FALSE(text_format_check(libsvm_positional(0)).ok());
  auto o = libsvm_fields();
  o.field_starts = {0, 10, 10};
  CHECK_FALSE(text_format_check(o).ok());
  o.field_starts = {0, 10};
  o.slots = 3;
  CHECK_FALSE(text_format_check(o).ok());
  CHECK(text_format_slots(libsvm_fields()) == 3);
  CHECK(text_format_slots(criteo()) == 26);
  CHECK(text_format_dense_features(criteo()) == 13);
  CHECK(text_format_dense_features(libffm(2)) == 1);
}
