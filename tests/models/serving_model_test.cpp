// models/serving: the export format round trip (trained rows exact, fp16 widened as the store
// reads them, untrained ids as their initial row), export shards by partition range, a subset
// of shards, damaged files refused, the request parser's errors, and the scorer against the
// dense model's forward pass.
#include "models/data/text_format.hpp"
#include "models/embedding/embedding_snapshot.hpp"
#include "models/embedding/embedding_table.hpp"
#include "models/serving/exported_model.hpp"
#include "models/serving/predict_request.hpp"
#include "runtime/partition_map.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

namespace fs = std::filesystem;
using namespace satrap;

namespace {

struct fixture {
  fs::path dir;
  exported_model_meta meta;
  std::vector<float> dense;
  std::vector<uint64_t> trained;
  std::vector<std::vector<float>> rows;  // as the table reads them

  explicit fixture(weight_precision precision, uint32_t shards = 1, feature_crosses crosses = {},
                   dlrm_interaction interaction = dlrm_interaction::dot) {
    dir =
      fs::temp_directory_path()
      / ("satrap-serving-test-" + std::to_string(::getpid()) + "-"
         + std::to_string(static_cast<int>(precision)) + "-" + std::to_string(shards) + "-"
         + std::to_string(crosses.size()) + "-" + std::to_string(static_cast<int>(interaction)));
    fs::remove_all(dir);
    meta.name = "t";
    meta.version = "v";
    meta.network.slots = 3;
    meta.network.dense_features = 2;
    meta.network.dim = 8;
    meta.network.bottom = {4};
    meta.network.top = {6};
    meta.network.interaction = interaction;
    meta.embedding.dim = 8;
    meta.embedding.precision = precision;
    meta.embedding.optimizer = sparse_optimizer_kind::adagrad;
    meta.embedding.seed = 42;
    meta.partitions = 16;
    meta.crosses = std::move(crosses);
    embedding_table table(meta.embedding);
    std::mt19937_64 rng(7);
    for (int i = 0; i < 500; ++i)
      trained.push_back(rng());
    std::vector<float> grads(trained.size() * 8, 0.5f), out(trained.size() * 8);
    table.lookup(trained, out.data());
    table.update(trained, grads.data());
    table.peek(trained, out.data());
    for (size_t i = 0; i < trained.size(); ++i)
      rows.emplace_back(out.begin() + i * 8, out.begin() + (i + 1) * 8);
    embedding_table* tables[] = {&table};
    auto snap = snapshot_write(tables, (dir / "snap").string(), 1, snapshot_kind::full);
    REQUIRE(snap.ok());
    dense.resize(dense_model_param_count(meta.network));
    for (size_t i = 0; i < dense.size(); ++i)
      dense[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
    auto rows_written =
      export_model((dir / "model").string(), meta, dense, (dir / "snap").string(), 1, shards);
    REQUIRE_MESSAGE(rows_written.ok(), rows_written.error());
    CHECK(rows_written.value() == trained.size());
  }
  ~fixture() { fs::remove_all(dir); }
};

}  // namespace

TEST_CASE("serving: an export reads back trained rows exactly and untrained ids as initial rows") {
  for (auto precision : {weight_precision::fp32, weight_precision::fp16}) {
    fixture f(precision);
    auto m = exported_model::open((f.dir / "model").string());
    REQUIRE_MESSAGE(m.ok(), m.error());
    CHECK(m.value()->rows() == f.trained.size());
    CHECK(m.value()->meta().name == "t");
    float row[8];
    for (size_t i = 0; i < f.trained.size(); ++i) {
      m.value()->lookup(f.trained[i], row);
      for (int d = 0; d < 8; ++d)
        REQUIRE(row[d] == f.rows[i][d]);
    }
    float init[8];
    for (uint64_t id : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}, uint64_t{123456789}}) {
      m.value()->lookup(id, row);
      embedding_init_row(f.meta.embedding, id, init);
      for (int d = 0; d < 8; ++d)
        CHECK(row[d] == init[d]);
    }
  }
}

TEST_CASE("serving: export shards split by partition - a server may hold a subset") {
  fixture f(weight_precision::fp32, 3);
  auto pm = partition_map::uniform(16, 3);
  for (auto id : f.trained)
    REQUIRE(exported_partition_of(id, 16) == pm.partition_of(id));
  auto sub = exported_model::open((f.dir / "model").string(), {1});
  REQUIRE(sub.ok());
  size_t held = 0;
  float row[8];
  for (size_t i = 0; i < f.trained.size(); ++i) {
    auto p = exported_partition_of(f.trained[i], 16);
    bool mine = p >= 16 / 3 && p < 2 * 16 / 3;
    CHECK(sub.value()->holds(f.trained[i]) == mine);
    if (mine) {
      ++held;
      sub.value()->lookup(f.trained[i], row);
      CHECK(row[0] == f.rows[i][0]);
    }
  }
  CHECK(held == sub.value()->rows());
  CHECK(held > 0);
  auto none = exported_model::open((f.dir / "model").string(), {7});
  REQUIRE(!none.ok());
  CHECK(none.error().find("no export shard 7") != std::string::npos);
}

TEST_CASE("serving: damaged or unfinished exports are refused with the file named") {
  fixture f(weight_precision::fp32);
  auto file = f.dir / "model" / "embeddings-0.bin";
  {
    std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(100);
    io.put('\x7f');
  }
  auto m = exported_model::open((f.dir / "model").string());
  REQUIRE(!m.ok());
  CHECK(m.error().find("embeddings-0.bin") != std::string::npos);
  fs::remove(f.dir / "model" / "MODEL.json");
  auto n = exported_model::open((f.dir / "model").string());
  REQUIRE(!n.ok());
  CHECK(n.error().find("unfinished export") != std::string::npos);
  auto again =
    export_model((f.dir / "model").string(), f.meta, f.dense, (f.dir / "snap").string(), 1);
  REQUIRE(!again.ok());
  CHECK(again.error().find("not empty") != std::string::npos);
}

TEST_CASE("serving: the scorer is the dense forward pass over pooled rows") {
  fixture f(weight_precision::fp32);
  auto m = exported_model::open((f.dir / "model").string());
  REQUIRE(m.ok());
  model_scorer scorer(m.value());
  // Two instances: bags (id0, id1), (), (unseen) and (id2), (id2, id2), (id3).
  std::vector<uint64_t> ids = {f.trained[0], f.trained[1], 99,          f.trained[2],
                               f.trained[2], f.trained[2], f.trained[3]};
  std::vector<uint32_t> offsets = {0, 2, 2, 3, 4, 6, 7};
  std::vector<float> dense = {0.5f, -1.0f, 2.0f, 0.25f};
  CHECK(check_score_input(*m.value(), 2, offsets, ids, {}, dense).empty());
  float logits[2];
  scorer.score(2, offsets, ids, {}, dense, logits);
  auto net = make_dense_model(f.meta.network, 0);
  std::copy(f.dense.begin(), f.dense.end(), net->params().begin());
  std::vector<float> pooled(2 * 3 * 8, 0.0f), init(8);
  embedding_init_row(f.meta.embedding, 99, init.data());
  for (int d = 0; d < 8; ++d) {
    pooled[0 * 8 + d] = f.rows[0][d] + f.rows[1][d];
    pooled[2 * 8 + d] = init[d];
    pooled[3 * 8 + d] = f.rows[2][d];
    pooled[4 * 8 + d] = f.rows[2][d] + f.rows[2][d];
    pooled[5 * 8 + d] = f.rows[3][d];
  }
  float want[2];
  net->forward(2, dense.data(), pooled.data(), want);
  CHECK(logits[0] == doctest::Approx(want[0]).epsilon(1e-6));
  CHECK(logits[1] == doctest::Approx(want[1]).epsilon(1e-6));
  CHECK(check_score_input(*m.value(), 2, offsets, ids, {}, std::vector<float>(3)).find("dense")
        != std::string::npos);
}

TEST_CASE("serving: request parsing accepts the documented form and names what is wrong") {
  predict_request_limits l;
  l.slots = 2;
  l.dense_features = 1;
  auto ok = parse_predict_request(
    R"({"instances":[{"dense":[0.5],"slots":[[1,18446744073709551615],["42"]]}]})", l);
  REQUIRE(ok.error.empty());
  CHECK(ok.input.ids == std::vector<uint64_t>{1, ~uint64_t{0}, 42});
  CHECK(ok.input.offsets == std::vector<uint32_t>{0, 2, 3});
  struct bad_case {
    const char* body;
    const char* says;
  } cases[] = {
    {"{", "malformed JSON"},
    {R"({"instances":[{"dense":[0.5],"slots":[[1],[2],[3]]}]})", "unknown slot 2"},
    {R"({"instances":[{"dense":[0.5,1],"slots":[[1],[2]]}]})", "wrong dense length 2"},
    {R"({"instances":[{"dense":[0.5],"slots":[[-3],[2]]}]})", "out of range"},
    {R"({"instances":[{"dense":[0.5],"slots":[["18446744073709551616"],[2]]}]})", "out of range"},
    {R"({"instances":[{"dense":[1e39],"slots":[[1],[2]]}]})", "finite"},
    {R"({"instances":[{"dense":[0.5],"slots":[[1],[2]],"x":1}]})", "unknown key"},
    {R"({"instances":{}})", "non-empty array"},
  };
  for (auto& c : cases) {
    auto r = parse_predict_request(c.body, l);
    INFO(c.body);
    CHECK(r.error.find(c.says) != std::string::npos);
  }
}

TEST_CASE(
  "serving: an export keeps the job's feature crosses and requests give only the data's slots") {
  fixture f(weight_precision::fp32, 1, {{0, 1}});  // 3 network slots: 2 of the data, 1 cross
  auto m = exported_model::open((f.dir / "model").string());
  REQUIRE_MESSAGE(m.ok(), m.error());
  CHECK(m.value()->meta().crosses == feature_crosses{{0, 1}});
  CHECK(m.value()->slots() == 3);
  CHECK(m.value()->input_slots() == 2);
  CHECK(fixture(weight_precision::fp32).meta.crosses.empty());
  // A MODEL.json whose crosses do not fit its slots is refused.
  auto path = f.dir / "model" / "MODEL.json";
  auto j = nlohmann::json::parse(std::ifstream(path));
  j["crosses"] = feature_crosses{{0, 2}};
  std::ofstream(path) << j.dump(2);
  auto bad = exported_model_read_meta((f.dir / "model").string());
  REQUIRE(!bad.ok());
  CHECK(bad.error().find("inconsistent model (crosses[0] [0, 2]: expected slots in [0, 2)")
        != std::string::npos);
}

TEST_CASE(
  "serving: MODEL.json keeps the network's interaction, so the served network is the trained one") {
  fixture f(weight_precision::fp32, 1, {}, dlrm_interaction::dot_cat);
  auto m = exported_model::open((f.dir / "model").string());
  REQUIRE_MESSAGE(m.ok(), m.error());
  CHECK(m.value()->meta().network.interaction == dlrm_interaction::dot_cat);
  auto path = f.dir / "model" / "MODEL.json";
  auto j = nlohmann::json::parse(std::ifstream(path));
  CHECK(j["network"]["interaction"] == "dot_cat");
  j["network"]["interaction"] = "outer";
  std::ofstream(path) << j.dump(2);
  auto bad = exported_model_read_meta((f.dir / "model").string());
  REQUIRE(!bad.ok());
  CHECK(bad.error().find("unknown network interaction 'outer' (dot, cat or dot_cat)")
        != std::string::npos);
  // An export from before the key was written is a dot network.
  fixture old(weight_precision::fp32);
  auto old_path = old.dir / "model" / "MODEL.json";
  auto oj = nlohmann::json::parse(std::ifstream(old_path));
  CHECK(oj["network"]["interaction"] == "dot");
  oj["network"].erase("interaction");
  std::ofstream(old_path) << oj.dump(2);
  auto read = exported_model_read_meta((old.dir / "model").string());
  REQUIRE_MESSAGE(read.ok(), read.error());
  CHECK(read.value().network.interaction == dlrm_interaction::dot);
}

TEST_CASE("serving: a model with named features takes instances by name, as its JSON lines") {
  fixture f(weight_precision::fp32);  // 3 slots, 2 dense features
  auto path = f.dir / "model" / "MODEL.json";
  auto j = nlohmann::json::parse(std::ifstream(path));
  auto feature = [](const char* name, const char* kind, const char* table, const char* pool,
                    int max_length, bool weights) {
    return nlohmann::json{{"name", name},
                          {"kind", kind},
                          {"table", table},
                          {"pooling", pool},
                          {"max_length", max_length},
                          {"weights", weights}};
  };
  j["features"] = {
    feature("user", "id", "", "", 0, false), feature("tags", "bag", "", "sqrtn", 0, true),
    feature("history", "sequence", "user", "mean", 2, false),
    feature("price", "dense", "", "", 0, false), feature("age", "dense", "", "", 0, false)};
  j["labels"] = {"click"};
  std::ofstream(path) << j.dump(2);
  auto opened = exported_model::open((f.dir / "model").string());
  REQUIRE_MESSAGE(opened.ok(), opened.error());
  const auto& m = *opened.value();
  CHECK(m.named());
  CHECK(m.slot_pool() == std::vector<pooling>{pooling::sum, pooling::sqrtn, pooling::mean});
  predict_request_limits l;
  l.max_instances = 2;
  auto ok = parse_named_predict_request(
    R"( {"instances": [{"click": 1, "user": "u\"1", "tags": {"ids": [3, 4], "weights": [0.5, 2]},
         "history": [7, 8, 9], "price": 1.5, "age": 30, "other": [[{}]]},
        {"user": null, "tags": {"ids": [], "weights": []}, "history": [], "price": 0, "age": -1}]} )",
    m, l);
  REQUIRE_MESSAGE(ok.error.empty(), ok.error);
  CHECK(ok.input.size == 2);
  // Two samples of 3 slots; the sequence cut to its 2 most recent ids; an empty bag and a
  // missing id read as the slot's missing id (one id), as the cache lays them out.
  CHECK(ok.input.offsets == std::vector<uint32_t>{0, 1, 3, 5, 6, 7, 8});
  CHECK(ok.input.ids[3] == feature_id_hash(0, 8));  // history shares user's table (0)
  CHECK(ok.input.ids[4] == feature_id_hash(0, 9));
  CHECK(ok.input.ids[6] == missing_id(1));
  CHECK(ok.input.weights == std::vector<float>{1, 0.5f, 2, 1, 1, 1, 1, 1});
  CHECK(ok.input.dense == std::vector<float>{1.5f, 30, 0, -1});
  CHECK(check_score_input(m, ok.input.size, ok.input.offsets, ok.input.ids, ok.input.weights,
                          ok.input.dense)
          .empty());
  model_scorer scorer(opened.value());
  float logits[2];
  scorer.score(ok.input, logits);
  CHECK(std::isfinite(logits[0]));
  const char* row =
    R"({"user": 1, "tags": {"ids": [1], "weights": [1]}, "history": [2], "price": 1, "age": 2})";
  struct bad_case {
    std::string body;
    const char* says;
  } cases[] = {
    {"", "malformed JSON"},
    {"{\"instances\": [", "instance 0: expected a JSON object"},
    {"{\"instances\": [{\"user\": \"\\", "instance 0: expected a JSON object"},
    {"{\"instances\": [{\"user\": 1}]", "missing_feature: expected the feature 'tags'"},
    {"{\"instances\": [" + std::string(row) + ", {\"user\": [1]}]}", "instance 1"},
    {"{\"instances\": [" + std::string(row) + "], \"x\": 1}", "unexpected key \"x\""},
    {"{\"instances\": [" + std::string(row) + "]} x", "text after"},
    {"{\"instances\": [" + std::string(row) + "," + row + "," + row + "]}", "more than 2"},
    {"{\"instances\": []}", "non-empty"},
    {"{\"instances\": [{\"user\": 1]}]}", "instance 0: expected a JSON object"},
    {"{\"instances\": [" + std::string(row) + "], \"instances\": []}", "twice"},
  };
  for (auto& c : cases) {
    auto r = parse_named_predict_request(c.body, m, l);
    INFO(c.body, " -> ", r.error);
    CHECK(r.error.find(c.says) != std::string::npos);
  }
  // Features that do not fit the network are refused at open.
  j["features"].erase(4);
  std::ofstream(path) << j.dump(2);
  auto bad = exported_model::open((f.dir / "model").string());
  REQUIRE(!bad.ok());
  CHECK(bad.error().find("inconsistent model") != std::string::npos);
}

TEST_CASE("serving: a model of weighted ids takes weights beside its slots, one per id") {
  predict_request_limits l;
  l.slots = 2;
  l.dense_features = 0;
  l.weights = true;
  auto ok = parse_predict_request(
    R"({"instances":[{"weights":[[0.5,2],[1]],"slots":[[1,2],["3"]]},{"slots":[[4],[]],"weights":[[3],[]]}]})",
    l);
  REQUIRE_MESSAGE(ok.error.empty(), ok.error);
  CHECK(ok.input.ids == std::vector<uint64_t>{1, 2, 3, 4});
  CHECK(ok.input.weights == std::vector<float>{0.5f, 2, 1, 3});
  struct bad_case {
    const char* body;
    const char* says;
  } cases[] = {
    {R"({"instances":[{"slots":[[1],[2]]}]})", "instances[0].weights: expected an array of 2"},
    {R"({"instances":[{"slots":[[1],[2]],"weights":[[1,1],[1]]}]})",
     "weights[0]: 2 weights for 1 ids"},
    {R"({"instances":[{"slots":[[1],[2]],"weights":[[1]]}]})", "weights[1]: 0 weights for 1 ids"},
    {R"({"instances":[{"slots":[[1],[2]],"weights":[[1],[1],[1]]}]})", "3 or more bags"},
    {R"({"instances":[{"slots":[[1],[2]],"weights":[[1],["x"]]}]})",
     "weights[1][0]: expected a number"},
    {R"({"instances":[{"slots":[[1],[2]],"weights":[[1],[1e39]]}]})", "finite"},
    {R"({"instances":[{"slots":[[1],[2]],"weights":7}]})", ".weights: expected an array of 2"},
    {R"({"instances":[{"slots":[[1],[2]],"weights":[[1],[1]],"weights":[]}]})", "given twice"},
  };
  for (auto& c : cases) {
    auto r = parse_predict_request(c.body, l);
    INFO(c.body, " -> ", r.error);
    CHECK(r.error.find(c.says) != std::string::npos);
  }
  l.weights = false;  // a model without weights refuses them
  auto r = parse_predict_request(R"({"instances":[{"slots":[[1],[2]],"weights":[[1],[1]]}]})", l);
  CHECK(r.error.find("unknown key \"weights\"") != std::string::npos);
}
