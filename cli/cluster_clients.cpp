// satrap submit, jobs, cancel, status: clients of the head's admin actor.
#include "cli/cli_timing.hpp"
#include "cli/cluster_commands.hpp"

#include "cli/cluster_common.hpp"
#include "cli/exit_status.hpp"
#include "cli/progress_line.hpp"
#include "runtime/error.hpp"
#include "runtime/text_file.hpp"

#include <caf/scoped_actor.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <optional>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace satrap {

namespace {

// A client session: the manifest, an actor system, the admin actor.
struct session {
  manifest m;
  std::string state_dir;
  std::unique_ptr<satrap_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
  admin_actor admin;
};

caf::expected<std::unique_ptr<session>> connect(const std::string& manifest_flag,
                                                const std::string& state_flag) {
  auto m = cluster_manifest(manifest_flag);
  if (!m)
    return m.error();
  auto s = std::make_unique<session>();
  s->m = std::move(*m);
  s->state_dir = cluster_state_dir(state_flag, s->m);
  s->cfg = std::make_unique<satrap_config>();
  s->cfg->set("logger.verbosity", caf::atom("quiet"));
  if (auto why = cluster_security_setup(*s->cfg, s->m, s->state_dir, "client"); !why.empty())
    return make_error(errc::invalid_config, why);
  s->sys = std::make_unique<caf::actor_system>(*s->cfg);
  auto admin = head_connect(*s->sys, s->m);
  if (!admin)
    return admin.error();
  s->admin = *admin;
  return s;
}

template <class T, class... Ts>
caf::expected<T> ask(session& s, Ts&&... xs) {
  caf::scoped_actor self{*s.sys};
  caf::expected<T> out{caf::error{}};
  self->request(s.admin, ms(cli_timing::client_request_ms), std::forward<Ts>(xs)...)
    .receive([&](T& x) { out = std::move(x); }, [&](caf::error& e) { out = std::move(e); });
  return out;
}

std::string fmt_auc(double x) {
  if (x < 0)
    return "-";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.4f", x);
  return buf;
}

int fail(const char* cmd, const caf::error& e) {
  std::cerr << "satrap " << cmd << ": " << error_text(e) << "\n";
  return exit_status_of(e);
}

}  // namespace

int cluster_commands::run_submit() {
  auto text = read_text_file(job_file_, job_file_max_bytes, "job file");
  if (!text)
    return fail("submit", text.error());
  // Check the file here first, so its errors name the file and line.
  auto spec = job_spec_defaults();
  if (auto err = job_spec_load_text(*text, job_file_, spec))
    return fail("submit", err);
  auto yaml = *text;
  if (!resume_dir_.empty()) {  // the job's text with checkpoint.resume_from set
    spec = job_spec_defaults();
    if (auto err = job_spec_load_file(job_file_, spec))
      return fail("submit", err);
    spec.checkpoint.resume_from = std::filesystem::absolute(resume_dir_).lexically_normal();
    if (spec.checkpoint.dir.empty())
      spec.checkpoint.dir = spec.checkpoint.resume_from;
    yaml = job_spec_to_yaml(spec);
  }
  if (auto err = job_spec_finalize(spec))
    return fail("submit", err);
  auto s = connect(manifest_file_, state_dir_);
  if (!s)
    return fail("submit", s.error());
  auto token = cluster_token(token_file_, (*s)->state_dir);
  auto id = ask<std::string>(**s, submit_atom::value, token, yaml);
  if (!id)
    return fail("submit", id.error());
  std::cout << "submitted job " << *id << " (" << spec.name << ")\n" << std::flush;
  if (!follow_)
    return 0;
  bool tty = isatty(STDERR_FILENO) != 0;
  std::optional<job_state> last_state;
  for (;;) {
    auto j = ask<job_record>(**s, get_atom::value, token, *id);
    if (!j)
      return fail("submit", j.error());
    if (j->state != last_state) {
      std::fprintf(stderr, "%sjob %s %s%s%s\n", tty ? "\r" : "", id->c_str(),
                   job_state_name(j->state), j->message.empty() ? "" : ": ", j->message.c_str());
      last_state = j->state;
    } else if (tty && j->state == job_state::running) {
      job_progress p;
      p.steps = j->steps;
      p.steps_total = j->steps_total;
      p.samples = j->samples;
      p.samples_per_sec = j->samples_per_sec;
      p.loss = j->loss;
      p.running_auc = j->running_auc;
      p.stream_lag = j->stream_lag;
      p.tier_hits = j->tier_hits;
      p.tier_misses = j->tier_misses;
      p.tier_ram_bytes = j->tier_ram_bytes;
      print_progress_line(p);
    }
    if (job_state_final(j->state)) {
      if (tty)
        std::fprintf(stderr, "\n");
      std::printf(
        "job %s %s: test auc %s  oracle auc %s  logloss %s  %lld samples  %.0f "
        "samples/s\n",
        id->c_str(), job_state_name(j->state), fmt_auc(j->test_auc).c_str(),
        fmt_auc(j->oracle_auc).c_str(), fmt_auc(j->test_logloss).c_str(),
        static_cast<long long>(j->samples), j->samples_per_sec);
      for (auto& [label, auc] : j->task_test_auc)  // several labels: each task's
        std::printf("job %s task %s: test auc %s\n", id->c_str(), label.c_str(),
                    fmt_auc(auc).c_str());
      if (json_)
        std::printf("%s\n", job_record_json(*j).dump().c_str());
      return j->state == job_state::succeeded ? 0 : 1;
    }
    std::this_thread::sleep_for(ms(cli_timing::job_poll_ms));
  }
}

int cluster_commands::run_jobs() {
  auto s = connect(manifest_file_, state_dir_);
  if (!s)
    return fail("jobs", s.error());
  auto token = cluster_token(token_file_, (*s)->state_dir);
  auto jobs = ask<std::vector<job_record>>(**s, list_atom::value, token);
  if (!jobs)
    return fail("jobs", jobs.error());
  if (!json_)
    std::printf("%-6s %-20s %-10s %12s %10s %10s  %s\n", "id", "name", "state", "samples",
                "test_auc", "oracle", "message");
  for (auto& j : *jobs) {
    if (json_)
      std::printf("%s\n", job_record_json(j).dump().c_str());
    else
      std::printf("%-6s %-20s %-10s %12lld %10s %10s  %s\n", j.id.c_str(), j.name.c_str(),
                  job_state_name(j.state), static_cast<long long>(j.samples),
                  fmt_auc(j.test_auc).c_str(), fmt_auc(j.oracle_auc).c_str(), j.message.c_str());
  }
  return 0;
}

int cluster_commands::run_cancel() {
  auto s = connect(manifest_file_, state_dir_);
  if (!s)
    return fail("cancel", s.error());
  auto token = cluster_token(token_file_, (*s)->state_dir);
  auto j = ask<job_record>(**s, cancel_atom::value, token, job_id_);
  if (!j)
    return fail("cancel", j.error());
  std::printf("job %s %s\n", j->id.c_str(), job_state_name(j->state));
  return 0;
}

int cluster_commands::run_checkpoint() {
  auto s = connect(manifest_file_, state_dir_);
  if (!s)
    return fail("checkpoint", s.error());
  auto token = cluster_token(token_file_, (*s)->state_dir);
  caf::scoped_actor self{*(*s)->sys};
  int status = 1;
  // A checkpoint waits for in-flight batches to drain and every shard to write: allow minutes.
  self->request((*s)->admin, std::chrono::minutes(30), checkpoint_atom::value, token, job_id_)
    .receive(
      [&](int64_t step) {
        std::printf("job %s: checkpoint at step %lld\n", job_id_.c_str(),
                    static_cast<long long>(step));
        status = 0;
      },
      [&](caf::error& e) { status = fail("checkpoint", e); });
  return status;
}

int cluster_commands::run_status() {
  auto s = connect(manifest_file_, state_dir_);
  if (!s)
    return fail("status", s.error());
  auto doc = ask<std::string>(**s, status_atom::value);
  if (!doc)
    return fail("status", doc.error());
  if (json_) {
    std::printf("%s\n", doc->c_str());
    return 0;
  }
  auto j = nlohmann::json::parse(*doc);
  std::printf("cluster %s (satrap %s)\n", j["cluster"].get<std::string>().c_str(),
              j["version"].get<std::string>().c_str());
  std::printf("%-20s %-22s %-6s %8s %10s\n", "node", "address", "alive", "cores", "heartbeats");
  for (auto& n : j["nodes"])
    std::printf("%-20s %-22s %-6s %8d %10lld\n", n["name"].get<std::string>().c_str(),
                (n["host"].get<std::string>() + ":" + std::to_string(n["port"].get<int>())).c_str(),
                n["alive"].get<bool>() ? "yes" : "no", n["resources"]["cores"].get<int>(),
                static_cast<long long>(n["heartbeats"].get<int64_t>()));
  std::printf("actors: %zu running\n", j["actors"].size());
  for (auto& job : j["jobs"])
    std::printf("job %-6s %-20s %-10s samples %lld  restarts %lld  checkpoints %lld\n",
                job["id"].get<std::string>().c_str(), job["name"].get<std::string>().c_str(),
                job["state"].get<std::string>().c_str(),
                static_cast<long long>(job["samples"].get<int64_t>()),
                static_cast<long long>(job.value("restarts", int64_t{0})),
                static_cast<long long>(job.value("checkpoints", int64_t{0})));
  return 0;
}

}  // namespace satrap
