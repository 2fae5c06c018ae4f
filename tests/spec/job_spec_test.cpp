// The job spec: defaults, YAML files, flag-style overrides, and errors that name key and line.
#include "runtime/error.hpp"
#include "spec/job_spec.hpp"

#include <doctest/doctest.h>

using namespace satrap;

namespace {

std::string load_error(const std::string& yaml) {
  auto spec = job_spec_defaults();
  auto err = job_spec_load_text(yaml, "job.yaml", spec);
  return err ? error_text(err) : std::string{};
}

const job_field& field(const std::string& key) {
  for (auto& f : job_fields())
    if (f.key == key)
      return f;
  FAIL("no field " << key);
  throw;
}

}  // namespace

TEST_CASE("a job file sets nested keys in every section") {
  auto spec = job_spec_defaults();
  auto err = job_spec_load_text(R"(
name: tiny
model:
  dim: 8
  bottom: [16, 12]
  top: [20]
  pooling: mean
  dense_optimizer: {kind: adagrad, learning_rate: 0.02}
  embedding: {optimizer: sgd, learning_rate: 0.5}
data:
  synthetic: {slots: 5, vocab: 1000, zipf_exponent: 1.2, seed: 9}
training: {batch_size: 64, train_batches: 30, test_batches: 3, staleness: 0}
placement: {shards: 3, aggregators: 2, loaders: 1, trainers: 2, partitions: 64}
checkpoint: {dir: "", every_steps: 0}
)",
                                "job.yaml", spec);
  REQUIRE_MESSAGE(!err, error_text(err));
  REQUIRE(!job_spec_finalize(spec));
  CHECK(spec.name == "tiny");
  CHECK(spec.model.network.dim == 8);
  CHECK(spec.model.embedding.dim == 8);
  CHECK(spec.model.network.bottom == std::vector<int>{16, 12});
  CHECK(spec.model.network.top == std::vector<int>{20});
  CHECK(spec.model.pool == pooling::mean);
  CHECK(spec.model.dense.kind == dense_optimizer_kind::adagrad);
  CHECK(spec.model.dense.learning_rate == doctest::Approx(0.02));
  CHECK(spec.model.embedding.optimizer == sparse_optimizer_kind::sgd);
  CHECK(spec.data.synthetic.slots == 5);
  CHECK(spec.model.network.slots == 5);
  CHECK(spec.data.synthetic.vocab == 1000);
  CHECK(spec.training.staleness == 0);
  CHECK(spec.placement.trainers == 2);
  CHECK(spec.placement.partitions == 64);
}

TEST_CASE("an unknown key is an error naming the key, file and line") {
  auto e = load_error("training:\n  batch_size: 64\n  stalenes: 3\n");
  CHECK(e.find("job.yaml:3:") != std::string::npos);
  CHECK(e.find("unknown key 'training.stalenes'") != std::string::npos);
  CHECK(load_error("trainig: {staleness: 1}\n").find("unknown key 'trainig.staleness'")
        != std::string::npos);
}

TEST_CASE("a bad value names the key, the line and what was expected") {
  auto e = load_error("placement:\n  shards: many\n");
  CHECK(e.find("job.yaml:2:") != std::string::npos);
  CHECK(e.find("placement.shards: expected an integer in [1, 4096], got 'many'")
        != std::string::npos);
  CHECK(load_error("placement: {shards: 0}").find("placement.shards") != std::string::npos);
  CHECK(load_error("model: {pooling: max}").find("expected one of sum mean") != std::string::npos);
  CHECK(load_error("model: {bottom: [64, -1]}").find("model.bottom: expected a list")
        != std::string::npos);
  CHECK(load_error("data: {synthetic: {zipf_exponent: x}}").find("expected a number")
        != std::string::npos);
}

TEST_CASE("model.type picks a model of the zoo and names the allowed ones when unknown") {
  auto spec = job_spec_defaults();
  CHECK(spec.model.network.type == dense_model_type::dlrm);
  REQUIRE(!job_spec_load_text("model: {type: dcn_v2, cross_layers: 2}\n", "job.yaml", spec));
  CHECK(spec.model.network.type == dense_model_type::dcn_v2);
  CHECK(spec.model.network.cross_layers == 2);
  CHECK(field("model.type").set(spec, "wide_deep").empty());
  CHECK(spec.model.network.type == dense_model_type::wide_deep);
  auto e = load_error("model:\n  type: xdeepfm\n");
  CHECK(e.find("job.yaml:2:") != std::string::npos);
  CHECK(e.find("model.type: expected one of dlrm dcn_v2 deepfm wide_deep torchscript, got 'xdeepfm'")
        != std::string::npos);
}

TEST_CASE("broken YAML and a non-map document are errors with a position") {
  CHECK(load_error("training: {staleness: 1\n").find("job.yaml:") != std::string::npos);
  CHECK(load_error("- just\n- a list\n").find("expected a map of sections") != std::string::npos);
  CHECK(load_error("").empty());
}

TEST_CASE("finalize checks what one key cannot") {
  auto spec = job_spec_defaults();
  spec.placement.trainers = 3;
  spec.training.train_batches = 100;
  auto err = job_spec_finalize(spec);
  REQUIRE(err);
  CHECK(error_text(err).find("multiple of placement.trainers") != std::string::npos);
  spec = job_spec_defaults();
  spec.checkpoint.every_steps = 100;
  CHECK(error_text(job_spec_finalize(spec)).find("checkpoint.dir: expected a directory")
        != std::string::npos);
}

TEST_CASE("a flag overrides the file through the same setter") {
  auto spec = job_spec_defaults();
  REQUIRE(!job_spec_load_text("training: {staleness: 5}\n", "job.yaml", spec));
  CHECK(spec.training.staleness == 5);
  CHECK(field("training.staleness").set(spec, "1").empty());
  CHECK(spec.training.staleness == 1);
  CHECK(!field("training.staleness").set(spec, "-1").empty());
  CHECK(spec.training.staleness == 1);
}

TEST_CASE("the printed spec loads back to the same spec") {
  auto spec = job_spec_defaults();
  spec.name = "round-trip";
  spec.model.network.top = {48, 24};
  spec.placement.shards = 7;
  auto yaml = job_spec_to_yaml(spec);
  auto back = job_spec_defaults();
  auto err = job_spec_load_text(yaml, "printed", back);
  REQUIRE_MESSAGE(!err, error_text(err) << "\n" << yaml);
  CHECK(job_spec_to_yaml(back) == yaml);
}

TEST_CASE("validation, early stopping and schedule keys: set from a file, checked together") {
  auto spec = job_spec_defaults();
  auto err = job_spec_load_text(R"(
model:
  dense_optimizer: {schedule: {kind: cosine, warmup_steps: 10, decay_steps: 1000, min_factor: 0.1}}
  embedding: {schedule: {kind: step, decay_steps: 500, decay_rate: 0.5}}
training:
  eval_every: 100
  validation_batches: 20
  early_stopping: {metric: logloss, patience: 3, min_delta: 0.0001}
  target_auc: 0.79
metrics: {group_by: 0}
)",
                                "job.yaml", spec);
  REQUIRE_MESSAGE(!err, error_text(err));
  CHECK(spec.model.dense.schedule.kind == lr_schedule_kind::cosine);
  CHECK(spec.model.dense.schedule.warmup_steps == 10);
  CHECK(spec.model.embedding.schedule.decay_rate == doctest::Approx(0.5));
  CHECK(spec.training.early_stopping.metric == stop_metric::logloss);
  CHECK(spec.training.early_stopping.patience == 3);
  CHECK(spec.metrics.group_by == 0);
  CHECK(!job_spec_finalize(spec));
  CHECK(job_has_validation(spec));
  auto yaml = job_spec_to_yaml(spec);
  CHECK(yaml.find("early_stopping.patience: 3") != std::string::npos);
  CHECK(yaml.find("schedule.kind: cosine") != std::string::npos);

  CHECK(load_error("training: {early_stopping: {metric: f1}}").find("one of auc logloss")
        != std::string::npos);
  CHECK(load_error("model: {embedding: {schedule: {kind: linear}}}").find("one of constant warmup")
        != std::string::npos);
  CHECK(load_error("data: {validation_fraction: 0.95}").find("data.validation_fraction")
        != std::string::npos);

  auto finalize_error = [](job_spec s) {
    auto e = job_spec_finalize(s);
    return e ? error_text(e) : std::string{};
  };
  auto s = job_spec_defaults();
  s.training.early_stopping.patience = 2;  // synthetic without a validation stream
  CHECK(finalize_error(s).find("expected a validation split") != std::string::npos);
  s = job_spec_defaults();
  s.model.dense.schedule.kind = lr_schedule_kind::step;  // no decay_steps
  CHECK(finalize_error(s).find("model.dense_optimizer.schedule.decay_steps") != std::string::npos);
  s = job_spec_defaults();
  s.metrics.group_by = 99;
  CHECK(finalize_error(s).find("metrics.group_by") != std::string::npos);
  s = job_spec_defaults();
  s.data.reading.validation_fraction = 0.1;  // synthetic data has a stream instead
  CHECK(finalize_error(s).find("validation stream") != std::string::npos);
}

// The training keys cross the wire to the cluster's nodes: each must read back as it was set.
TEST_CASE("validation, early stopping, schedule, interaction and dropout keys survive the wire") {
  auto spec = job_spec_defaults();
  REQUIRE(job_spec_load_text(R"(
model:
  interaction: dot_cat
  top: [64, 32]
  dropout: 0.25
  dense_optimizer: {schedule: {kind: cosine, warmup_steps: 10, decay_steps: 1000, min_factor: 0.1}}
  embedding: {schedule: {kind: step, decay_steps: 500, decay_rate: 0.5}}
training:
  eval_every: 100
  validation_batches: 20
  early_stopping: {metric: logloss, patience: 3, min_delta: 0.0001}
  target_auc: 0.79
  history_file: "/tmp/h: x.jsonl"
metrics: {group_by: 1}
)",
                             "job.yaml", spec)
          == caf::none);
  REQUIRE_FALSE(job_spec_finalize(spec));
  auto yaml = job_spec_to_yaml(spec);
  auto back = job_spec_from_wire(yaml, "wire");
  REQUIRE_MESSAGE(back, error_text(back.error()) << "\n" << yaml);
  CHECK(back->model.network.interaction == spec.model.network.interaction);
  CHECK(back->model.network.dropout == doctest::Approx(0.25));
  CHECK(back->model.dense.schedule.kind == lr_schedule_kind::cosine);
  CHECK(back->model.dense.schedule.warmup_steps == 10);
  CHECK(back->model.dense.schedule.min_factor == doctest::Approx(0.1));
  CHECK(back->model.embedding.schedule.kind == lr_schedule_kind::step);
  CHECK(back->model.embedding.schedule.decay_steps == 500);
  CHECK(back->training.eval_every == 100);
  CHECK(back->training.validation_batches == 20);
  CHECK(back->training.early_stopping.metric == stop_metric::logloss);
  CHECK(back->training.early_stopping.patience == 3);
  CHECK(back->training.early_stopping.min_delta == doctest::Approx(0.0001));
  CHECK(back->training.target_auc == doctest::Approx(0.79));
  CHECK(back->training.history_file == "/tmp/h: x.jsonl");
  CHECK(back->metrics.group_by == 1);
  CHECK(job_spec_to_yaml(*back) == yaml);
}

// A job named "a: b" with 200 train batches once ran as the default job on the cluster: the spec
// crossed the wire unquoted. Every string must survive, and the wire check must hold.
TEST_CASE("strings YAML would misread survive the wire: names, paths") {
  for (std::string name : {"a: b", "{x", "run #7", "[list]", "- dash", "quote \" and ' both", "",
                           "yes", "null", "~", "colon:", "tab\there", "ünïcode"}) {
    CAPTURE(name);
    auto spec = job_spec_defaults();
    spec.name = name;
    spec.training.train_batches = 200;
    spec.checkpoint.dir = "/tmp/ck: " + name;
    REQUIRE_FALSE(job_spec_finalize(spec));
    auto yaml = job_spec_to_yaml(spec);
    auto back = job_spec_from_wire(yaml, "wire");
    REQUIRE_MESSAGE(back, error_text(back.error()) << "\n" << yaml);
    CHECK(back->name == name);
    CHECK(back->training.train_batches == 200);
    CHECK(back->checkpoint.dir == spec.checkpoint.dir);
  }
}

TEST_CASE("a spec that is not the canonical text of itself is refused on arrival") {
  auto spec = job_spec_defaults();
  REQUIRE_FALSE(job_spec_finalize(spec));
  auto yaml = job_spec_to_yaml(spec);
  CHECK(job_spec_from_wire(yaml, "wire"));
  auto edited = yaml + "# a comment\n";
  auto r = job_spec_from_wire(edited, "wire");
  REQUIRE_FALSE(r);
  CHECK(error_text(r.error()).find("does not read back") != std::string::npos);
}

TEST_CASE(
  "the job's timing section sets the job knobs, travels in the YAML, and refuses unknown keys") {
  auto spec = job_spec_defaults();
  CHECK(spec.timing.spawn_timeout_ms == 120000);  // spec/knobs.hpp defaults
  REQUIRE(
    job_spec_load_text("timing: {replan_delay_ms: 0, hold_timeout_ms: 2500}\n", "j.yaml", spec)
    == caf::none);
  CHECK(spec.timing.replan_delay_ms == 0);
  CHECK(spec.timing.hold_timeout_ms == 2500);
  auto again = job_spec_defaults();  // what a node agent parses
  REQUIRE(job_spec_load_text(job_spec_to_yaml(spec), "yaml", again) == caf::none);
  CHECK(again.timing.hold_timeout_ms == 2500);
  CHECK(again.timing.replan_delay_ms == 0);
  CHECK(load_error("timing: {hold_timeout: 5}\n").find("unknown key 'timing.hold_timeout'")
        != std::string::npos);
  CHECK(load_error("timing: {spawn_timeout_ms: 0}\n").find("timing.spawn_timeout_ms")
        != std::string::npos);
}

TEST_CASE("data.crosses: set from a file or by flag text, checked with the data, and on the wire") {
  auto spec = job_spec_defaults();
  REQUIRE(job_spec_load_text("data:\n  crosses: [[0, 1], [2, 3, 4]]\n", "job.yaml", spec)
          == caf::none);
  CHECK(spec.data.crosses == feature_crosses{{0, 1}, {2, 3, 4}});
  REQUIRE_FALSE(job_spec_finalize(spec));
  CHECK(spec.model.network.slots == 8 + 2);  // the synthetic data's 8 slots and one per cross
  CHECK(job_data_input_slots(spec.data) == 8);
  auto yaml = job_spec_to_yaml(spec);
  CHECK(yaml.find("crosses: [[0, 1], [2, 3, 4]]") != std::string::npos);
  auto back = job_spec_from_wire(yaml, "wire");
  REQUIRE_MESSAGE(back, error_text(back.error()) << "\n" << yaml);
  CHECK(back->data.crosses == spec.data.crosses);
  CHECK(job_spec_to_yaml(*back) == yaml);
  // The flag's text: one inner list per use of --cross, joined by job_options.
  CHECK(field("data.crosses").nested);
  CHECK(field("data.crosses").flag == "cross");
  CHECK(field("data.crosses").set(spec, "[1,2],[0,7]").empty());
  CHECK(spec.data.crosses == feature_crosses{{1, 2}, {0, 7}});
  CHECK(field("data.crosses").set(spec, "[]").empty());
  CHECK(spec.data.crosses.empty());
  CHECK(job_spec_to_yaml(job_spec_defaults()).find("crosses: []") != std::string::npos);
}

TEST_CASE("data.crosses: bad crosses are errors naming the key and what was expected") {
  CHECK(load_error("data: {crosses: [0, 1]}").find("data.crosses: expected a list of crosses")
        != std::string::npos);
  CHECK(load_error("data: {crosses: [[0, x]]}").find("data.crosses: expected a list of crosses")
        != std::string::npos);
  CHECK(load_error("data: {crosses: [[0, [1]]]}").find("data.crosses: expected")
        != std::string::npos);
  auto finalize_error = [](const std::string& yaml) {
    auto spec = job_spec_defaults();
    REQUIRE(job_spec_load_text(yaml, "job.yaml", spec) == caf::none);
    auto err = job_spec_finalize(spec);
    return err ? error_text(err) : std::string{};
  };
  CHECK(finalize_error("data: {crosses: [[0, 1]]}").empty());
  CHECK(
    finalize_error("data: {crosses: [[0]]}").find("data.crosses[0] [0]: expected 2 or more slots")
    != std::string::npos);
  CHECK(finalize_error("data: {crosses: [[0, 8]]}").find("expected slots in [0, 8)")
        != std::string::npos);
  CHECK(finalize_error("data: {crosses: [[3, 3]]}").find("distinct slots") != std::string::npos);
  CHECK(finalize_error("data: {crosses: [[0, 1], [1, 0]]}").find("crossed once")
        != std::string::npos);
  CHECK(finalize_error("data: {synthetic: {slots: 3}, crosses: [[0, 3]]}").find("[0, 3)")
        != std::string::npos);
}

TEST_CASE("training.blas_threads: 0 is auto, a count is taken, a negative one is refused") {
  auto spec = job_spec_defaults();
  CHECK(spec.training.blas_threads == 0);
  auto err = job_spec_load_text("training: {blas_threads: 3}\n", "job.yaml", spec);
  REQUIRE_MESSAGE(!err, error_text(err));
  CHECK(spec.training.blas_threads == 3);
  auto bad = job_spec_defaults();
  err = job_spec_load_text("training: {blas_threads: -1}\n", "job.yaml", bad);
  REQUIRE(err);
  CHECK(error_text(err).find("training.blas_threads") != std::string::npos);
}
