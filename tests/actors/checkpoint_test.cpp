// Consistent checkpoints and resuming from them (models/checkpoint/job_checkpoint.hpp), and
// the restart intensity rule of the job supervisor.
#include "models/checkpoint/job_checkpoint.hpp"
#include "actors/embedded_job.hpp"
#include "actors/node_agent/node_agent.hpp"
#include "runtime/restart_intensity.hpp"
#include "actors/type_registry.hpp"
#include "runtime/error.hpp"
#include "runtime/payload_checks.hpp"

#include <caf/scoped_actor.hpp>
#include <cblas.h>
#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <functional>
#include <fstream>
#include <unistd.h>

using namespace satrap;
namespace fs = std::filesystem;

namespace {

job_spec ckpt_job(const std::string& dir) {
  auto spec = job_spec_defaults();
  spec.data.synthetic.slots = 5;
  spec.data.synthetic.vocab = 4000;
  spec.data.synthetic.seed = 99;
  spec.training.batch_size = 128;
  spec.training.train_batches = 120;
  spec.training.test_batches = 12;
  spec.training.staleness = 0;
  spec.placement.shards = 3;
  spec.placement.aggregators = 2;
  spec.placement.loaders = 2;
  spec.placement.partitions = 64;
  spec.checkpoint.dir = dir;
  spec.checkpoint.every_steps = dir.empty() ? 0 : 40;
  spec.checkpoint.full_every = 5;  // one full, then incremental ones
  return spec;
}

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("satrap-ckpt-test-" + std::to_string(::getpid()));
  temp_dir() { fs::remove_all(path); }
  ~temp_dir() { fs::remove_all(path); }
};

}  // namespace

namespace {

// Where a shard crashes at a known step: at the first gradient update of a batch of training
// step `step` or later (batch n is trainer n % T's step n / T), which it does not apply.
struct step_crash {
  int32_t shard = -1;  // -1: none
  int64_t step = 0;
  int32_t trainers = 1;
  uint32_t dim = 0;
  std::shared_ptr<std::atomic<bool>> crashed = std::make_shared<std::atomic<bool>>(false);
};

// In front of a real shard: forwards every message; crashes (quits as if it threw, which ends
// the linked real shard too) as `crash` says.
embedding_shard_actor spawn_crashing_shard(caf::actor_system& sys, embedding_shard_actor real,
                                           step_crash crash) {
  return sys.spawn(
    [=](embedding_shard_actor::pointer self) -> embedding_shard_actor::behavior_type {
      self->link_to(real);
      return {
        [=](lookup_atom a, capnp_payload& p) { return self->delegate(real, a, std::move(p)); },
        [=](update_atom a, capnp_payload& p) -> caf::result<int64_t> {
          auto v = decode_embedding_gradients(p, crash.dim);
          if (v && v->batch / crash.trainers >= crash.step && !crash.crashed->exchange(true)) {
            self->quit(caf::exit_reason::unhandled_exception);
            return make_error(errc::peer_failure, "crashed");
          }
          return self->delegate(real, a, std::move(p));
        },
        [=](stats_atom a) { return self->delegate(real, a); },
        [=](snapshot_atom a, std::string& d, uint64_t q, bool f) {
          return self->delegate(real, a, std::move(d), q, f);
        },
        [=](restore_atom a, std::string& d, uint64_t q) {
          return self->delegate(real, a, std::move(d), q);
        },
      };
    });
}

// A node agent for the test: spawns through a real agent and keeps the shards' handles, so the
// test can kill one mid-training (a crash of that actor, as the supervisor sees it); with a
// step_crash, the first generation's shard `crash.shard` crashes at that step.
struct recording_agent_state {
  node_agent_actor real;
  std::shared_ptr<std::vector<caf::actor>> shards;
};

node_agent_actor spawn_recording_agent(caf::actor_system& sys,
                                       std::shared_ptr<std::vector<caf::actor>> shards,
                                       step_crash crash = {}) {
  return sys.spawn([shards, crash](node_agent_actor::stateful_pointer<recording_agent_state> self)
                     -> node_agent_actor::behavior_type {
    self->state.real = spawn_node_agent(self->system(), {"test"});
    self->state.shards = shards;
    auto& real = self->state.real;
    auto d = std::chrono::seconds(30);
    auto wrapped = std::make_shared<bool>(false);
    return {
      [=](spawn_atom a, shard_atom r, const std::string& y, int32_t i) {
        auto rp = self->make_response_promise<embedding_shard_actor>();
        self->request(real, d, a, r, y, i)
          .then(
            [=](embedding_shard_actor& h) mutable {
              if (i == crash.shard && !*wrapped) {
                *wrapped = true;
                h = spawn_crashing_shard(self->system(), h, crash);
              }
              self->state.shards->push_back(caf::actor_cast<caf::actor>(h));
              rp.deliver(std::move(h));
            },
            [=](caf::error& e) mutable { rp.deliver(std::move(e)); });
        return rp;
      },
      [=](spawn_atom a, aggregator_atom r, const std::string& y, int32_t i,
          std::vector<embedding_shard_actor>& x) {
        return self->delegate(real, a, r, y, i, std::move(x));
      },
      [=](spawn_atom a, loader_atom r, const std::string& y, int32_t i,
          std::vector<gradient_aggregator_actor>& x) {
        return self->delegate(real, a, r, y, i, std::move(x));
      },
      [=](spawn_atom a, trainer_atom r, const std::string& y, int32_t i,
          std::vector<data_loader_actor>& l, std::vector<gradient_aggregator_actor>& g,
          progress_sink_actor& p) {
        return self->delegate(real, a, r, y, i, std::move(l), std::move(g), std::move(p));
      },
      [=](head_atom a, const caf::node_id& head) { self->send(real, a, head); },
    };
  });
}

// Crashes shard `shard` of the first generation (as if it threw) once `when(progress)` holds.
// (A `kill` from outside would be fatal to its linked supervisor too: CAF 0.17 does not let an
// exit handler trap `kill`.)
struct crash_plan {
  size_t shard = 0;
  std::function<bool(const job_progress&)> when;
};

struct job_run {
  caf::expected<job_result> result{caf::error{}};
  bool crashed = false;
  size_t shards_spawned = 0;
};

job_run run_job(job_spec spec, const crash_plan* crash, const step_crash* at_step = nullptr) {
  job_run out;
  if (auto err = job_spec_finalize(spec)) {
    out.result = err;
    return out;
  }
  openblas_set_num_threads(1);
  satrap_config cfg;
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system sys{cfg};
  auto shards = std::make_shared<std::vector<caf::actor>>();
  job_supervisor_config config;
  config.spec = spec;
  if (at_step) {
    config.nodes.push_back(spawn_recording_agent(sys, shards, *at_step));
    config.own_nodes = true;
  } else if (crash) {
    config.nodes.push_back(spawn_recording_agent(sys, shards));
    config.own_nodes = true;
    config.observer = [crash, shards, &out](const job_progress& p) {
      if (!out.crashed && shards->size() > crash->shard && crash->when(p)) {
        out.crashed = true;
        caf::anon_send_exit((*shards)[crash->shard], caf::exit_reason::unhandled_exception);
      }
    };
  }
  auto sup =
    config.nodes.empty() ? spawn_embedded_job(sys, config) : spawn_job_supervisor(sys, config);
  caf::scoped_actor self{sys};
  self->request(sup, caf::infinite, run_atom::value)
    .receive([&](job_result& r) { out.result = std::move(r); },
             [&](caf::error& e) { out.result = std::move(e); });
  self->send_exit(sup, caf::exit_reason::user_shutdown);
  out.shards_spawned = shards->size();
  if (at_step)
    out.crashed = at_step->crashed->load();
  return out;
}

caf::expected<job_result> run(job_spec spec) { return run_job(std::move(spec), nullptr).result; }

}  // namespace

TEST_CASE("checkpoints do not change training, and a resumed job trains the same rest") {
  temp_dir tmp;
  auto dir = tmp.path.string();
  INFO("data seed=99 model seed=7 dir=" << dir);
  auto plain = run(ckpt_job(""));
  REQUIRE_MESSAGE(plain, error_text(plain.error()));
  auto with = run(ckpt_job(dir));
  REQUIRE_MESSAGE(with, error_text(with.error()));
  CHECK(with->checkpoints == 2);  // cuts at steps 40 and 80 (120 is the end)
  REQUIRE(with->step_losses.size() == plain->step_losses.size());
  for (size_t i = 0; i < plain->step_losses.size(); ++i) {
    CAPTURE(i);
    CHECK(with->step_losses[i] == doctest::Approx(plain->step_losses[i]).epsilon(1e-6));
  }
  CHECK(with->test_auc == doctest::Approx(plain->test_auc).epsilon(1e-6));
  CHECK(with->samples == plain->samples);

  auto latest = checkpoint_latest(dir);
  REQUIRE(latest);
  REQUIRE(latest->has_value());
  CHECK((*latest)->step == 80);
  CHECK(!(*latest)->full);  // the second one is incremental: resuming restores the chain

  // A job that resumes from the newest checkpoint (step 80) trains steps 80..119 again: the same
  // losses, the same model, the same AUC; its result counts all 120 steps.
  auto spec = ckpt_job(dir);
  spec.checkpoint.resume_from = dir;
  auto resumed = run(spec);
  REQUIRE_MESSAGE(resumed, error_text(resumed.error()));
  REQUIRE(resumed->step_losses.size() == plain->step_losses.size());
  for (size_t i = 0; i < plain->step_losses.size(); ++i) {
    CAPTURE(i);
    CHECK(resumed->step_losses[i] == doctest::Approx(plain->step_losses[i]).epsilon(1e-5));
  }
  CHECK(resumed->test_auc == doctest::Approx(plain->test_auc).epsilon(1e-5));
  CHECK(resumed->samples == plain->samples);
}

TEST_CASE("a checkpoint directory that holds checkpoints is not overwritten by a new job") {
  temp_dir tmp;
  auto dir = tmp.path.string();
  REQUIRE(run(ckpt_job(dir)));
  auto again = run(ckpt_job(dir));
  REQUIRE(!again);
  CHECK(error_text(again.error()).find("already holds checkpoints") != std::string::npos);
  auto spec = ckpt_job("");
  spec.checkpoint.resume_from = (tmp.path / "nothing-here").string();
  auto none = run(spec);
  REQUIRE(!none);
  CHECK(error_text(none.error()).find("no complete checkpoint") != std::string::npos);
}

TEST_CASE("a damaged dense state is refused with the file named") {
  temp_dir tmp;
  auto dir = tmp.path.string();
  REQUIRE(run(ckpt_job(dir)));
  auto latest = checkpoint_latest(dir);
  REQUIRE(latest);
  REQUIRE(latest->has_value());
  {
    std::fstream f(tmp.path / (*latest)->dense_file,
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  auto dense = checkpoint_read_dense(dir, **latest);
  REQUIRE(!dense);
  auto err = make_error(dense.failure());  // as the supervisor sees it: io_failure
  CHECK(errc_of(err, errc::invalid_config) == errc::io_failure);
  CHECK(error_text(err).find("checksum") != std::string::npos);
  CHECK(error_text(err).find((*latest)->dense_file) != std::string::npos);
}

TEST_CASE("a checkpoint manifest naming a dense file outside its folder is refused") {
  temp_dir tmp;
  auto dir = tmp.path.string();
  REQUIRE(run(ckpt_job(dir)));
  auto latest = checkpoint_latest(dir);
  REQUIRE(latest);
  REQUIRE(latest->has_value());
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint-%08llu.json",
                static_cast<unsigned long long>((*latest)->sequence));
  std::string text;
  {
    std::ifstream in(tmp.path / name);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto at = text.find((*latest)->dense_file);
  REQUIRE(at != std::string::npos);
  text.replace(at, (*latest)->dense_file.size(), "../../elsewhere.bin");
  std::ofstream(tmp.path / name) << text;
  auto refused = checkpoint_latest(dir);
  REQUIRE(!refused);
  auto err = make_error(refused.failure());  // a malformed manifest: invalid_config
  CHECK(errc_of(err, errc::io_failure) == errc::invalid_config);
  CHECK(error_text(err).find("dense_file '../../elsewhere.bin' is not a file name")
        != std::string::npos);
}

TEST_CASE("restart intensity: at most R restarts within any window of T") {
  using namespace std::chrono;
  restart_intensity ri(2, seconds(10));
  steady_clock::time_point t0{};
  CHECK(ri.allow(t0));
  CHECK(ri.allow(t0 + seconds(1)));
  CHECK(!ri.allow(t0 + seconds(2)));           // a third within 10 s
  CHECK(ri.allow(t0 + milliseconds(10500)));   // the first has left the window
  CHECK(!ri.allow(t0 + milliseconds(10500)));  // the second has not
  CHECK(ri.total() == 3);
  restart_intensity never(0, seconds(10));
  CHECK(!never.allow(t0));
}

TEST_CASE(
  "a shard that crashes mid-training is restored from the checkpoint and the job ends well") {
  temp_dir tmp;
  auto spec = ckpt_job(tmp.path.string());
  spec.training.train_batches = 160;
  spec.training.staleness = 2;
  INFO("data seed=99 model seed=7 dir=" << tmp.path.string());
  REQUIRE(!job_spec_finalize(spec));
  auto undisturbed_spec = spec;
  undisturbed_spec.checkpoint.dir = (tmp.path / "undisturbed").string();
  auto undisturbed = run(undisturbed_spec);
  REQUIRE_MESSAGE(undisturbed, error_text(undisturbed.error()));

  // Crash shard 1 once the job is past its first checkpoint (step 40).
  crash_plan crash{1, [](const job_progress& p) { return p.checkpoints >= 1 && p.steps >= 60; }};
  auto r = run_job(spec, &crash);
  auto& out = r.result;
  REQUIRE_MESSAGE(out, error_text(out.error()));
  CHECK(r.crashed);
  CHECK(out->restarts == 1);
  REQUIRE(out->failures.size() == 1);
  CHECK(out->failures[0].find("failed") != std::string::npos);
  CHECK(out->batches_replayed > 0);             // the steps after the checkpoint were trained again
  CHECK(out->samples == undisturbed->samples);  // and counted once
  CHECK(out->step_losses.size() == undisturbed->step_losses.size());
  CHECK(std::abs(out->test_auc - undisturbed->test_auc) < 0.003);
  CHECK(r.shards_spawned == 6);  // two generations of 3 shards
}

TEST_CASE("batches_replayed is exactly the trainers' steps between the checkpoint and the crash") {
  // Staleness 0: a trainer looks step s + 1 up only once every trainer's step s is on the shards,
  // so when shard 1 refuses the first update of step 57, both trainers have applied steps 0..56
  // and none of step 57. The checkpoint is at step 40: 2 trainers x 17 steps are rolled back.
  temp_dir tmp;
  auto spec = ckpt_job(tmp.path.string());
  spec.placement.trainers = 2;
  spec.training.train_batches = 240;  // 120 steps per trainer; checkpoints at 40 and 80
  REQUIRE(!job_spec_finalize(spec));
  step_crash crash;
  crash.shard = 1;
  crash.step = 57;
  crash.trainers = 2;
  crash.dim = static_cast<uint32_t>(spec.model.embedding.dim);
  INFO("data seed=99 model seed=7 dir=" << tmp.path.string());
  auto r = run_job(spec, nullptr, &crash);
  auto& out = r.result;
  REQUIRE_MESSAGE(out, error_text(out.error()));
  CHECK(r.crashed);
  CHECK(out->restarts == 1);
  CHECK(out->batches_replayed == 2 * (57 - 40));
  CHECK(out->steps_total == 120);
}

TEST_CASE("past the restart intensity the job fails with the reason") {
  temp_dir tmp;
  auto spec = ckpt_job(tmp.path.string());
  spec.supervision.max_restarts = 0;
  crash_plan crash{0, [](const job_progress& p) { return p.steps >= 20; }};
  auto r = run_job(spec, &crash);
  REQUIRE(!r.result);
  auto error = error_text(r.result.error());
  CHECK(r.crashed);
  CHECK(error.find("restart intensity exceeded (0 restarts within 600 s)") != std::string::npos);
  CHECK(error.find("failed") != std::string::npos);
}
