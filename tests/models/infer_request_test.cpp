// models/serving/infer_request: the KServe v2 parser's cases the HTTP test does not reach
// (tests/serving/kserve_test.py has the rest): keys in any order (data before its datatype),
// nested data, bags with INT32 lengths, binary INT32 lengths, the output choice, and its limits
// (depth, nesting, values before a datatype, duplicate inputs, a bag past max_ids_per_bag).
#include "models/serving/infer_request.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <string>

using namespace satrap;

namespace {

infer_model_io io_2x3() {
  infer_model_io io;
  io.name = "m";
  io.version = "v1";
  io.slots = 3;
  io.dense_features = 2;
  io.max_instances = 8;
  io.max_ids_per_bag = 4;
  return io;
}

infer_request_parse parse(const std::string& body) {
  return parse_infer_request(body, std::string::npos, io_2x3());
}

}  // namespace

TEST_CASE("infer_request: data before datatype and name, nested, UINT64 and INT64 bit patterns") {
  auto r = parse(R"({"inputs": [
    {"data": [[1, 2, 3], [18446744073709551615, 5, 6]], "shape": [2, 3], "datatype": "UINT64", "name": "ids"},
    {"name": "dense", "datatype": "FP32", "shape": [2, 2], "data": [[0.5, 1], [2, -3.25]]}]})");
  REQUIRE(r.error.empty());
  CHECK(r.input.size == 2);
  CHECK(r.input.ids == std::vector<uint64_t>{1, 2, 3, ~uint64_t{0}, 5, 6});
  CHECK(r.input.offsets == std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6});
  CHECK(r.input.dense == std::vector<float>{0.5f, 1, 2, -3.25f});
  REQUIRE(r.outputs.size() == 2);
  CHECK(!r.outputs[0].binary);
  auto s =
    parse(R"({"inputs": [{"name": "ids", "datatype": "INT64", "shape": [1, 3], "data": [-1, 0, 7]},
    {"name": "dense", "datatype": "FP32", "shape": [1, 2], "data": [0, 0]}]})");
  REQUIRE(s.error.empty());
  CHECK(s.input.ids == std::vector<uint64_t>{~uint64_t{0}, 0, 7});
}

TEST_CASE("infer_request: bags by ids_lengths, as JSON and as binary INT32") {
  auto r = parse(R"({"inputs": [
    {"name": "ids_lengths", "datatype": "INT32", "shape": [2, 3], "data": [1, 0, 2, 4, 1, 1]},
    {"name": "ids", "datatype": "INT64", "shape": [9], "data": [1, 2, 3, 4, 5, 6, 7, 8, 9]},
    {"name": "dense", "datatype": "FP32", "shape": [2, 2], "data": [0, 0, 0, 0]}]})");
  REQUIRE(r.error.empty());
  CHECK(r.input.offsets == std::vector<uint32_t>{0, 1, 1, 3, 7, 8, 9});
  // The same with the lengths as binary INT32 and the ids as binary INT64.
  std::string head =
    R"({"inputs": [{"name": "ids_lengths", "datatype": "INT32", "shape": [2, 3], "parameters": {"binary_data_size": 24}},
    {"name": "ids", "datatype": "INT64", "shape": [9], "parameters": {"binary_data_size": 72}},
    {"name": "dense", "datatype": "FP32", "shape": [2, 2], "data": [0, 0, 0, 0]}]})";
  std::string body = head;
  for (int32_t len : {1, 0, 2, 4, 1, 1})
    body.append(reinterpret_cast<const char*>(&len), 4);
  for (int64_t id = 1; id <= 9; ++id)
    body.append(reinterpret_cast<const char*>(&id), 8);
  auto b = parse_infer_request(body, head.size(), io_2x3());
  REQUIRE(b.error.empty());
  CHECK(b.input.offsets == r.input.offsets);
  CHECK(b.input.ids == r.input.ids);
  // A bag past max_ids_per_bag, and lengths that do not add up.
  auto big = parse(R"({"inputs": [
    {"name": "ids_lengths", "datatype": "INT32", "shape": [1, 3], "data": [5, 0, 0]},
    {"name": "ids", "datatype": "INT64", "shape": [5], "data": [1, 2, 3, 4, 5]},
    {"name": "dense", "datatype": "FP32", "shape": [1, 2], "data": [0, 0]}]})");
  CHECK(big.error.find("ids_lengths'[0, 0]: 5 ids, a bag has 0..4") != std::string::npos);
  auto sum = parse(R"({"inputs": [
    {"name": "ids_lengths", "datatype": "INT32", "shape": [1, 3], "data": [1, 1, 1]},
    {"name": "ids", "datatype": "INT64", "shape": [2], "data": [1, 2]},
    {"name": "dense", "datatype": "FP32", "shape": [1, 2], "data": [0, 0]}]})");
  CHECK(sum.error.find("add up to 3") != std::string::npos);
}

TEST_CASE("infer_request: outputs asked by name, binary per output or for all") {
  std::string inputs =
    R"("inputs": [{"name": "ids", "datatype": "INT64", "shape": [1, 3], "data": [1, 2, 3]},
    {"name": "dense", "datatype": "FP32", "shape": [1, 2], "data": [0, 0]}])";
  auto r = parse("{" + inputs + R"(, "parameters": {"binary_data_output": true, "custom": "x"},
    "outputs": [{"name": "logits"}, {"name": "predictions", "parameters": {"binary_data": false}}]})");
  REQUIRE(r.error.empty());
  REQUIRE(r.outputs.size() == 2);
  CHECK((r.outputs[0].what == infer_output::logits && r.outputs[0].binary));
  CHECK((r.outputs[1].what == infer_output::predictions && !r.outputs[1].binary));
  float logits[1] = {0.0f};
  size_t header = 0;
  auto body = infer_response(io_2x3(), "abc", logits, 1, r.outputs, header);
  REQUIRE(header != std::string::npos);
  REQUIRE(body.size() == header + 4);
  auto j = nlohmann::json::parse(body.substr(0, header));
  CHECK(j["id"] == "abc");
  CHECK(j["outputs"][0]["parameters"]["binary_data_size"] == 4);
  CHECK(j["outputs"][1]["data"][0] == 0.5);
  float back = 1;
  std::memcpy(&back, body.data() + header, 4);
  CHECK(back == 0.0f);
  auto twice = parse("{" + inputs + R"(, "outputs": [{"name": "logits"}, {"name": "logits"}]})");
  CHECK(twice.error == "output 'logits' asked twice");
}

TEST_CASE("infer_request: limits before allocating") {
  // JSON deeper than the parser takes, data nested deeper than 4 arrays.
  std::string deep = R"({"inputs": [{"name": "ids", "data": [[[[[1]]]]]}]})";
  CHECK(parse(deep).error.find("nested deeper than 4 arrays") != std::string::npos);
  // Values past the shape stop the parse at the first one.
  auto over = parse(
    R"({"inputs": [{"name": "ids", "datatype": "INT64", "shape": [1, 3], "data": [1, 2, 3, 4]}]})");
  CHECK(over.error.find("more values in data than its shape [1, 3] holds (3)")
        != std::string::npos);
  auto dup = parse(R"({"inputs": [{"name": "ids"}, {"name": "ids"}]})");
  CHECK(dup.error == "input 'ids' given twice");
  auto rows = parse(
    std::string(R"({"inputs": [{"name": "ids", "datatype": "INT64", "shape": [9, 3], "data": [)")
    + R"(0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]},
    {"name": "dense", "datatype": "FP32", "shape": [9, 2], "data": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}]})");
  CHECK(rows.status == 413);
  CHECK(rows.error == "9 instances, at most 8 per request");
  auto shape = parse(R"({"inputs": [{"name": "ids", "shape": [1099511627776, 1099511627776]}]})");
  CHECK(shape.status == 413);
  std::string header_error;
  int status = 0;
  CHECK(parse_header_length("12", 10, 100, header_error, status) == std::string::npos);
  CHECK(status == 400);
  CHECK(parse_header_length("101", 200, 100, header_error, status) == std::string::npos);
  CHECK(status == 413);
  CHECK(parse_header_length("7", 10, 100, header_error, status) == 7);
}
