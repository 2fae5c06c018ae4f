// The admin's job accounting and the node agent's per-job caches (defects found by reading the
// code, each with the test that failed before its fix).
#include "actors/admin/admin.hpp"
#include "actors/admin/admin_state.hpp"
#include "actors/embedded_job.hpp"
#include "models/memory_env.hpp"
#include "actors/node_agent/node_agent.hpp"
#include "actors/type_registry.hpp"
#include "runtime/error.hpp"
#include "spec/job_spec.hpp"

#include <caf/scoped_actor.hpp>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

using namespace satrap;
namespace fs = std::filesystem;

namespace {

// A fresh folder under the build's test-work (or /tmp), removed at the end.
struct scratch_dir {
  fs::path path;
  explicit scratch_dir(const std::string& name) {
    path =
      fs::temp_directory_path() / ("satrap-admin-node-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~scratch_dir() { fs::remove_all(path); }
};

// A cluster "t" of one node, n0.
manifest one_node_manifest() {
  manifest m;
  REQUIRE_FALSE(
    manifest_load_text("cluster: t\nhead: {host: 127.0.0.1, port: 1, status_port: 2}\n"
                       "nodes:\n  - {name: n0, host: 127.0.0.1, port: 3, "
                       "resources: {cores: 2, memory: 4GiB}}\n",
                       "test", m));
  return m;
}

std::string read_all(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("job states: every name round-trips - a name no satrap wrote reads as FAILED") {
  for (auto s : all_job_states)
    CHECK(job_state_from_name(job_state_name(s)) == s);
  CHECK(job_state_from_name("RUNNNING") == job_state::failed);
  CHECK(job_state_final(job_state::succeeded));
  CHECK_FALSE(job_state_final(job_state::placing));
}

// Defect 1: restarts were computed from last_failure before it was overwritten: after a head
// restart and one in-job failure, /status showed 2, then 1.
TEST_CASE("admin: restarts after a head restart and an in-job failure stay 2") {
  job_record j;
  j.restarts = 1;  // as requeue_or_fail leaves it
  j.head_restarts = 1;
  j.last_failure = "the head stopped";
  job_progress p;
  job_apply_progress(j, p);
  CHECK(j.restarts == 1);
  p.restarts = 1;
  p.last_failure = "node node-1 lost";
  job_apply_progress(j, p);
  CHECK(j.restarts == 2);
  p.last_failure.clear();  // the next progress report, nothing new
  job_apply_progress(j, p);
  CHECK(j.restarts == 2);
  CHECK(j.last_failure == "node node-1 lost");
}

// Defect 3: the admin started a job without checking that its stored spec still loads: a
// failure would silently have run the defaults.
TEST_CASE("admin: a queued job whose stored spec does not load fails with the reason") {
  scratch_dir dir("spec");
  nlohmann::json table;
  table["jobs"] = nlohmann::json::array();
  table["jobs"].push_back({{"id", "j1"},
                           {"name", "broken"},
                           {"state", "PENDING"},
                           {"spec_yaml", "training: {train_batches: lots}\n"}});
  table["next_id"] = 2;
  std::ofstream(dir.path / "jobs.json") << table.dump();
  manifest m = one_node_manifest();
  satrap_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  admin_config ac{m, "v", "token", dir.path.string(), {}, {}};
  ac.node_tokens["n0"] = "node-token";
  auto admin = spawn_admin(sys, ac);
  auto agent = spawn_node_agent(sys, {"n0"});
  self
    ->request(admin, std::chrono::seconds(10), register_atom::value,
              node_info{"t", "v", "n0", agent, "node-token"})
    .receive([](std::string&) {}, [](caf::error& e) { FAIL(error_text(e)); });
  job_record got;
  for (int i = 0; i < 100 && !job_state_final(got.state); ++i) {
    self
      ->request(admin, std::chrono::seconds(10), get_atom::value, std::string("token"),
                std::string("j1"))
      .receive([&](job_record& r) { got = r; }, [](caf::error& e) { FAIL(error_text(e)); });
    if (!job_state_final(got.state))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(got.state == job_state::failed);
  CHECK(got.message.find("does not load") != std::string::npos);
  CHECK(got.message.find("train_batches") != std::string::npos);
  self->send_exit(admin, caf::exit_reason::user_shutdown);
  self->send_exit(agent, caf::exit_reason::user_shutdown);
}

// Robustness item 4: a job the cluster cannot hold (too many shards for its memory, an over-large
// admission sketch) or whose batch overflows a message is refused at submission, with the cause.
TEST_CASE("admin: a job that cannot fit the cluster is refused at submission") {
  scratch_dir dir("fit");
  manifest m;
  REQUIRE_FALSE(
    manifest_load_text("cluster: t\nhead: {host: 127.0.0.1, port: 1, status_port: 2}\n"
                       "nodes:\n  - {name: n0, host: 127.0.0.1, port: 3, "
                       "resources: {cores: 16, memory: 64GiB}}\n",
                       "test", m));
  satrap_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  admin_config ac{m, "v", "token", dir.path.string(), {}, {}};
  auto admin = spawn_admin(sys, ac);
  auto submit = [&](const std::string& yaml) {
    std::string out;
    self->request(admin, std::chrono::seconds(10), submit_atom::value, std::string("token"), yaml)
      .receive([&](std::string& id) { out = "id " + id; },
               [&](caf::error& e) { out = error_text(e); });
    return out;
  };
  CHECK(submit("placement: {shards: 4096, partitions: 4096}\n").find("plan does not fit")
        != std::string::npos);
  CHECK(
    submit(
      "model: {embedding: {admission: count_min, sketch_width: 1073741824, sketch_depth: 16}}\n")
      .find("plan does not fit")
    != std::string::npos);
  CHECK(submit("training: {batch_size: 1048576}\n").find("expected at most") != std::string::npos);
  CHECK(submit("name: fits\n").rfind("id ", 0) == 0);
  self->send_exit(admin, caf::exit_reason::user_shutdown);
}

// Defects 2 and 4: the node agent kept every job's opened data (a mapped chunk store) forever,
// and converted file data inside a CAF worker thread. Now it keeps the newest jobs_kept jobs and
// opens file data on a thread of its own.
TEST_CASE("node agent: an old job's file data is unmapped once newer jobs replace it") {
  scratch_dir dir("cache");
  std::string lines;
  for (int i = 0; i < 300; ++i)
    lines += std::string(i % 2 ? "1" : "0") + " " + std::to_string(i % 10) + ":1 "
             + std::to_string(10 + i % 7) + ":1\n";
  std::ofstream(dir.path / "train.libsvm") << lines;
  std::ofstream(dir.path / "test.libsvm") << lines;
  auto raw_yaml = [&](const std::string& name) {
    return "name: " + name + "\ndata:\n  source: libsvm\n  train_files: ["
           + (dir.path / "train.libsvm").string() + "]\n  test_files: ["
           + (dir.path / "test.libsvm").string() + "]\n  field_starts: [0, 10]\n"
           + "  cache_dir: " + (dir.path / ("cache-" + name)).string()
           + "\ntraining: {batch_size: 16, train_batches: 4, test_batches: 1}\n";
  };
  auto job_yaml = [&](const std::string& name) {  // as it crosses the wire: job_spec_to_yaml
    auto spec = job_spec_defaults();
    auto err = job_spec_load_text(raw_yaml(name), "job", spec);
    if (!err)
      err = job_spec_finalize(spec);
    REQUIRE_MESSAGE(!err, error_text(err));
    return job_spec_to_yaml(spec);
  };
  auto mapped = [](const std::string& what) {
    return read_all("/proc/self/maps").find(what) != std::string::npos;
  };
  satrap_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  node_agent_config nc{"n0"};
  nc.jobs_kept = 1;
  auto agent = spawn_node_agent(sys, nc);
  auto spawn_loader = [&](const std::string& name) {
    data_loader_actor loader;
    self
      ->request(agent, std::chrono::seconds(60), spawn_atom::value, loader_atom::value,
                job_yaml(name), int32_t{0}, std::vector<gradient_aggregator_actor>{})
      .receive([&](data_loader_actor& h) { loader = h; },
               [](caf::error& e) { FAIL(error_text(e)); });
    REQUIRE(loader);
    return loader;
  };
  auto stop = [&](data_loader_actor& a) {
    self->send_exit(a, caf::exit_reason::user_shutdown);
    self->wait_for(a);
    a = nullptr;
  };
  auto a = spawn_loader("a");
  CHECK(mapped("cache-a"));
  stop(a);
  CHECK(mapped("cache-a"));  // kept for the job's next loader
  auto b = spawn_loader("b");
  stop(b);
  CHECK(mapped("cache-b"));
  CHECK_FALSE(mapped("cache-a"));  // forgotten: no actor holds it, the agent let it go
  self->send_exit(agent, caf::exit_reason::user_shutdown);
}

// Issue 42: job_record's fields are listed once (job_record_fields); the JSON both ways walks it.
TEST_CASE(
  "job_record: every field round-trips through jobs.json's JSON - unknown results are null") {
  job_record j;
  j.id = "j7";
  j.name = "n";
  j.state = job_state::cancelled;
  j.message = "m";
  j.submitted_ms = 1;
  j.started_ms = 2;
  j.ended_ms = 3;
  j.steps = 4;
  j.steps_total = 5;
  j.samples = 6;
  j.samples_per_sec = 7.5;
  j.loss = 0.25;
  j.running_auc = 0.5;
  j.test_auc = 0.75;  // known
  j.oracle_auc = -1;  // not known: null
  j.test_logloss = 0.125;
  j.restarts = 8;
  j.head_restarts = 9;
  j.batches_replayed = 10;
  j.checkpoints = 11;
  j.checkpoint_step = 12;
  j.gradients_lost = 13;
  j.last_failure = "f";
  j.validation_step = 14;
  j.validation_auc = 0.625;
  j.validation_logloss = -1;
  j.best_step = 15;
  j.best_validation_auc = 0.875;
  j.spec_yaml = "name: n\n";
  auto shown = job_record_json(j);
  CHECK(shown.at("state") == "CANCELLED");
  CHECK(shown.at("oracle_auc").is_null());
  CHECK(shown.at("validation_logloss").is_null());
  CHECK_FALSE(shown.contains("spec_yaml"));  // /status and `satrap jobs --json` leave it out
  auto stored = job_record_json(j, true);
  CHECK(stored.at("spec_yaml") == "name: n\n");
  size_t fields = 0;
  for_each_job_field([&](const auto&) { ++fields; });
  CHECK(stored.size() == fields);
  auto back = job_record_from_json(stored);
  CHECK(job_record_json(back, true) == stored);
  CHECK(back.oracle_auc == -1);
  CHECK(back.state == job_state::cancelled);
  // A record written without some fields keeps their defaults; one without a state is FAILED.
  auto partial = job_record_from_json(nlohmann::json{{"id", "j1"}});
  CHECK(partial.state == job_state::failed);
  CHECK(partial.checkpoint_step == -1);
  CHECK(partial.test_auc == -1);
}

// Issue 42: refusals are typed (admin_refusal from the error's code), not told by their text.
TEST_CASE("admin: refusals are typed - a wrong token is unauthorized, a missing job a conflict") {
  manifest m = one_node_manifest();
  satrap_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  admin_config ac{m, "v", "token", "", {}, {}};
  auto admin = spawn_admin(sys, ac);
  auto cancel = [&](const std::string& token, const std::string& id) {
    caf::error got;
    self->request(admin, std::chrono::seconds(10), cancel_atom::value, token, id)
      .receive([](job_record&) { FAIL("not refused"); }, [&](caf::error& e) { got = e; });
    return got;
  };
  auto wrong = cancel("nope", "j1");
  CHECK(refusal_of(wrong) == admin_refusal::unauthorized);
  auto missing = cancel("token", "j1");
  CHECK(refusal_of(missing) == admin_refusal::conflict);
  // A message that happens to say "token" is still a conflict: the type decides.
  CHECK(refusal_of(make_error(errc::invalid_config, "no job 'token'")) == admin_refusal::conflict);
  self->send_exit(admin, caf::exit_reason::user_shutdown);
}

// Issue 42: an embedded job (`satrap train`) runs under an admin of its own; its job table is
// written through the config's env (here in memory) and its /status is the admin's.
TEST_CASE("admin: an embedded admin runs a job to its result - the table goes through its env") {
  memory_env files;
  REQUIRE(files.create_dirs("/state").ok());
  satrap_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  admin_config ac;
  ac.cluster = embedded_manifest();
  ac.version = "v";
  ac.token = "token";
  ac.state_dir = "/state";
  ac.environment = &files;
  ac.embedded.on = true;
  auto admin = spawn_admin(sys, ac);
  auto spec = job_spec_defaults();
  REQUIRE_FALSE(
    job_spec_load_text("name: tiny\ndata:\n  synthetic: {slots: 4, vocab: 2000}\n"
                       "training: {batch_size: 64, train_batches: 40, test_batches: 4}\n"
                       "placement: {shards: 2, aggregators: 1, loaders: 1, trainers: 2}\n",
                       "test", spec));
  REQUIRE_FALSE(job_spec_finalize(spec));
  job_result got;
  self
    ->request(admin, std::chrono::seconds(60), run_atom::value, std::string("token"),
              job_spec_to_yaml(spec))
    .receive([&](job_result& r) { got = std::move(r); },
             [](caf::error& e) { FAIL(error_text(e)); });
  CHECK(got.samples == 40 * 64);
  CHECK(got.test_auc > 0.5);
  std::string status;
  self->request(admin, std::chrono::seconds(10), status_atom::value)
    .receive([&](std::string& s) { status = s; }, [](caf::error& e) { FAIL(error_text(e)); });
  auto doc = nlohmann::json::parse(status);
  CHECK(doc.at("embedded") == true);
  CHECK(doc.at("read_only") == true);
  CHECK(doc.at("nodes").at(0).at("name") == "local");
  CHECK(doc.at("jobs").at(0).at("state") == "SUCCEEDED");
  auto table = files.read_file("/state/jobs.json");
  REQUIRE(table.ok());
  CHECK(nlohmann::json::parse(table.value()).at("jobs").at(0).at("name") == "tiny");
  CHECK_FALSE(fs::exists("/state/jobs.json"));
  // Only this process may ask for a job's whole result; from here it is, with the token checked.
  self
    ->request(admin, std::chrono::seconds(10), run_atom::value, std::string("bad"),
              job_spec_to_yaml(spec))
    .receive([](job_result&) { FAIL("not refused"); },
             [](caf::error& e) { CHECK(refusal_of(e) == admin_refusal::unauthorized); });
  self->send_exit(admin, caf::exit_reason::user_shutdown);
}
