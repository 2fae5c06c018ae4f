// data.features and data.labels: named features parsed from a job file, checked (each error names
// the feature), laid out as slots, tables and per-slot pooling, and carried over the wire; a job
// without them is the job it was.
#include "runtime/error.hpp"
#include "spec/job_spec.hpp"

#include <doctest/doctest.h>

using namespace satrap;

namespace {

const char* jsonl_job = R"(
model: {pooling: mean}
data:
  source: jsonl
  train_files: [a.jsonl]
  labels: [click]
  features:
    - {name: user, kind: id}
    - {name: item, kind: id}
    - {name: history, kind: sequence, table: item, max_length: 50, pooling: sqrtn}
    - {name: tags, kind: bag, pooling: sum, max_length: 20}
    - name: topics
      kind: bag
      weights: true
    - {name: price, kind: dense}
)";

std::string error_of(const std::string& yaml) {
  auto spec = job_spec_defaults();
  if (auto err = job_spec_load_text(yaml, "job.yaml", spec))
    return error_text(err);
  auto err = job_spec_finalize(spec);
  return err ? error_text(err) : std::string{};
}

}  // namespace

TEST_CASE("data.features: a job file's features become slots, tables and per-slot pooling") {
  auto spec = job_spec_defaults();
  REQUIRE(job_spec_load_text(jsonl_job, "job.yaml", spec) == caf::none);
  auto err = job_spec_finalize(spec);
  REQUIRE_MESSAGE(!err, error_text(err));
  auto& f = spec.data.format.features;
  REQUIRE(f.size() == 6);
  CHECK(f[2].kind == feature_kind::sequence);
  CHECK(f[2].table == "item");
  CHECK(f[2].max_length == 50);
  CHECK(f[4].weights);
  CHECK(spec.data.format.format == text_format::jsonl);
  CHECK(spec.data.format.labels == std::vector<std::string>{"click"});
  CHECK(spec.model.network.slots == 5);
  CHECK(spec.model.network.dense_features == 1);
  // Unset pooling follows model.pooling (mean here).
  CHECK(job_slot_pooling(spec)
        == std::vector<pooling>{pooling::mean, pooling::mean, pooling::sqrtn, pooling::sum,
                                pooling::mean});
  auto layout = feature_schema_layout(f, spec.model.pool);
  REQUIRE(layout.ok());
  CHECK(layout->tables == std::vector<std::string>{"user", "item", "tags", "topics"});
  CHECK(layout->table_of == std::vector<int>{0, 1, 1, 2, 3, -1});
  CHECK(layout->weighted);
}

TEST_CASE("data.features: the printed spec reads back, over the wire too") {
  auto spec = job_spec_defaults();
  REQUIRE(job_spec_load_text(jsonl_job, "job.yaml", spec) == caf::none);
  REQUIRE_FALSE(job_spec_finalize(spec));
  auto yaml = job_spec_to_yaml(spec);
  CHECK(yaml.find("name: history") != std::string::npos);
  auto back = job_spec_from_wire(yaml, "wire");
  REQUIRE_MESSAGE(back, error_text(back.error()) << "\n" << yaml);
  CHECK(job_spec_to_yaml(*back) == yaml);
  CHECK(feature_schema_text(back->data.format.features)
        == feature_schema_text(spec.data.format.features));
  CHECK(back->data.labels == std::vector<std::string>{"click"});
}

TEST_CASE("data.features: without them a job is the job it was") {
  auto spec = job_spec_defaults();
  REQUIRE_FALSE(job_spec_finalize(spec));
  CHECK(job_slot_pooling(spec).empty());
  auto yaml = job_spec_to_yaml(spec);
  CHECK(yaml.find("features: []") != std::string::npos);
  CHECK(yaml.find("labels: [label]") != std::string::npos);
  auto back = job_spec_from_wire(yaml, "wire");
  REQUIRE(back);
  CHECK(back->data.format.features.empty());
}

TEST_CASE("data.features: every mistake is an error naming the feature (and the line)") {
  auto job = [](const std::string& features, const std::string& more = "") {
    return "data:\n  source: jsonl\n  train_files: [a.jsonl]\n" + more + "  features: " + features
           + "\n";
  };
  auto has = [](const std::string& error, const std::string& part) {
    INFO(error);
    CHECK(error.find(part) != std::string::npos);
  };
  has(error_of(job("[{name: tags, kind: bag, poolng: sum}]")),
      "job.yaml:4:13: data.features: feature 'tags': unknown key 'poolng'");
  has(error_of(job("[{name: tags, kind: bags}]")), "feature 'tags': kind: expected one of id bag");
  has(error_of(job("[{name: tags, kind: bag, pooling: max}]")),
      "feature 'tags': pooling: expected one of sum mean sqrtn");
  has(error_of(job("[{kind: bag}]")), "data.features[0]: name: expected the feature's name");
  has(error_of(job("[{name: a}, {name: a}]")), "feature 'a': the name is used by another");
  has(error_of(job("[{name: h, kind: sequence}]")), "feature 'h': a sequence needs max_length");
  has(error_of(job("[{name: u, kind: id, weights: true}]")), "feature 'u': an id feature");
  has(error_of(job("[{name: p, kind: dense, table: x}]")), "feature 'p': a dense feature takes");
  has(error_of(job("[{name: p, kind: dense}]")), "at least one id, bag or sequence feature");
  has(error_of(job("[{name: 'a b'}]")), "feature 'a b': expected a name of");
  has(error_of(job("[{name: t, kind: bag, max_length: 0}]")), "feature 't': max_length: expected");
  has(error_of(job("{name: t}")), "data.features: expected a list of features");
  has(error_of(job("[{name: t, table: [x]}]")), "feature 't': table: expected a single value");
  has(error_of(job("[{name: u}]", "  labels: [click, click]\n")), "'click' is twice");
  has(error_of(job("[{name: u}]", "  labels: [click, buy]\n") + "training: {task_weights: [1]}\n"),
      "training.task_weights: expected one weight per label of data.labels (2), got 1");
  has(error_of(job("[{name: u}]", "  labels: [click, buy]\n") + "model: {type: deepfm}\n"),
      "deepfm has one logit");
  has(error_of(job("[{name: click}]", "  labels: [click]\n")), "'click' is a feature's name");
  has(error_of(job("[{name: u}]", "  crosses: [[0, 0]]\n")), "data.crosses: not yet supported");
  has(error_of("data: {source: jsonl, train_files: [a.jsonl]}"),
      "data.features: expected the named features");
  has(error_of("data: {features: [{name: u}]}"), "data.features: expected data.source jsonl");
  has(error_of("data: {source: criteo, train_files: [a], labels: [click]}"),
      "data.labels: expected data.source jsonl");
  has(error_of("data: {labels: [click, buy, share]}"), "synthetic data has one label, or two");
}

TEST_CASE("data.labels: several labels are tasks of the network, weighted, over the wire too") {
  auto spec = job_spec_defaults();
  REQUIRE_FALSE(job_spec_load_text(
    "data: {source: jsonl, train_files: [a.jsonl], labels: [click, buy], features: [{name: u}]}\n"
    "training: {task_weights: [1, 0.25]}\n",
    "job.yaml", spec));
  REQUIRE_FALSE(job_spec_finalize(spec));
  CHECK(spec.model.network.tasks == 2);
  CHECK(spec.model.network.task_weights == std::vector<float>{1.0f, 0.25f});
  CHECK(spec.data.format.labels == std::vector<std::string>{"click", "buy"});
  auto back = job_spec_defaults();
  REQUIRE_FALSE(job_spec_load_text(job_spec_to_yaml(spec), "wire", back));
  REQUIRE_FALSE(job_spec_finalize(back));
  CHECK(back.model.network.tasks == 2);
  CHECK(back.model.network.task_weights == spec.model.network.task_weights);
  // Synthetic data: two labels are the click-and-purchase teacher.
  auto syn = job_spec_defaults();
  REQUIRE_FALSE(job_spec_load_text("data: {labels: [click, purchase]}\n", "job.yaml", syn));
  REQUIRE_FALSE(job_spec_finalize(syn));
  CHECK(syn.data.synthetic.tasks == 2);
  CHECK(syn.model.network.tasks == 2);
}

TEST_CASE("data.value_weights: libsvm / libfm / libffm only") {
  auto spec = job_spec_defaults();
  REQUIRE(job_spec_load_text("data: {source: libfm, train_files: [a.libfm], field_starts: [0, 10], "
                             "value_weights: true}",
                             "job.yaml", spec)
          == caf::none);
  REQUIRE_FALSE(job_spec_finalize(spec));
  CHECK(spec.data.format.value_weights);
  auto back = job_spec_from_wire(job_spec_to_yaml(spec), "wire");
  REQUIRE(back);
  CHECK(back->data.format.value_weights);
  CHECK(error_of("data: {source: criteo, train_files: [a.txt], value_weights: true}")
          .find("data.value_weights: expected data.source libsvm, libfm or libffm")
        != std::string::npos);
}

TEST_CASE("data.features: names YAML would misread survive the wire") {
  auto spec = job_spec_defaults();
  REQUIRE(job_spec_load_text("data: {source: jsonl, train_files: [a.jsonl], features: "
                             "[{name: 'null'}, {name: 'true', table: '1e3', kind: bag}]}",
                             "job.yaml", spec)
          == caf::none);
  REQUIRE_FALSE(job_spec_finalize(spec));
  auto yaml = job_spec_to_yaml(spec);
  auto back = job_spec_from_wire(yaml, "wire");
  REQUIRE_MESSAGE(back, error_text(back.error()) << "\n" << yaml);
  REQUIRE(back->data.format.features.size() == 2);
  CHECK(back->data.format.features[0].name == "null");
  CHECK(back->data.format.features[1].table == "1e3");
}

TEST_CASE("data.features: pooling none keeps a sequence unpooled, for a TorchScript model") {
  const char* job = R"(
data:
  source: jsonl
  train_files: [a.jsonl]
  features:
    - {name: user, kind: id}
    - {name: item, kind: id}
    - {name: history, kind: sequence, table: item, max_length: 20, pooling: none}
    - {name: tags, kind: bag, pooling: mean}
    - {name: price, kind: dense}
)";
  auto spec = job_spec_defaults();
  REQUIRE(job_spec_load_text(job, "job.yaml", spec) == caf::none);
  // The built-in models take pooled features only (the data section is finalized by then).
  auto refused = job_spec_finalize(spec);
  REQUIRE(refused);
  CHECK(error_text(refused).find("feature 'history' has pooling: none") != std::string::npos);
  // The model sees 3 pooled slots and 20 positions; the dense features and then the length.
  auto seq = job_data_sequences(spec.data);
  CHECK(seq.slots == std::vector<int>{2});
  CHECK(seq.lengths == std::vector<int>{20});
  CHECK(job_data_slots(spec.data) == 23);
  CHECK(job_data_dense_features(spec.data) == 2);
  auto pools = job_slot_pooling(spec);
  REQUIRE(pools.size() == 23);
  CHECK(pools[2] == pooling::mean);  // tags, now the third pooled slot
  CHECK(pools[22] == pooling::sum);  // a position: its one id
  // The built-in models take pooled features only.
  auto err = error_of(job);
  CHECK(err.find("feature 'history' has pooling: none") != std::string::npos);
  CHECK(err.find("model.type torchscript") != std::string::npos);
  // Only a sequence can be unpooled; the printed schema keeps `none`.
  CHECK(error_of(R"(
data:
  source: jsonl
  train_files: [a.jsonl]
  features: [{name: tags, kind: bag, pooling: none}]
)").find("feature 'tags': pooling: none is for a sequence")
        != std::string::npos);
  CHECK(feature_schema_text(spec.data.format.features).find("pooling: none") != std::string::npos);
  CHECK(error_of(R"(
data:
  source: jsonl
  train_files: [a.jsonl]
  features: [{name: h, kind: sequence, max_length: 3, pooling: max}]
)").find("expected one of sum mean sqrtn none")
        != std::string::npos);
}

TEST_CASE("data.synthetic.history: one more slot, pooled by history_pooling or unpooled") {
  auto spec = job_spec_defaults();
  REQUIRE(job_spec_load_text("data: {synthetic: {slots: 4, history: 12, history_pooling: mean}}",
                             "job.yaml", spec)
          == caf::none);
  auto err = job_spec_finalize(spec);
  REQUIRE_MESSAGE(!err, error_text(err));
  CHECK(spec.model.network.slots == 5);
  CHECK(spec.model.network.sequences.empty());
  CHECK(job_slot_pooling(spec)
        == std::vector<pooling>{spec.model.pool, spec.model.pool, spec.model.pool,
                                spec.model.pool, pooling::mean});
  auto unpooled = job_spec_defaults();
  REQUIRE(job_spec_load_text("data: {synthetic: {slots: 4, history: 12, history_pooling: none}}",
                             "job.yaml", unpooled)
          == caf::none);
  CHECK(job_data_slots(unpooled.data) == 4 + 12);
  CHECK(job_data_dense_features(unpooled.data) == unpooled.data.synthetic.dense_features + 1);
  CHECK(error_of("data: {synthetic: {slots: 4, history: 12, history_pooling: none}}")
          .find("feature 'history' has pooling: none")
        != std::string::npos);
  CHECK(error_of("data: {synthetic: {slots: 1, history: 12}}")
          .find("expected data.synthetic.slots >= 2")
        != std::string::npos);
  CHECK(error_of("data: {synthetic: {slots: 3, bag_sizes: [1, 2]}}")
          .find("expected one size per slot (3")
        != std::string::npos);
}
