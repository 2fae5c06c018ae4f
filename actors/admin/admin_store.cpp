#include "actors/admin/admin_state.hpp"

#include "models/checkpoint/job_checkpoint.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <fstream>

namespace satrap {

namespace {

// A result field: null (not known yet) reads as -1.
double result_of(const nlohmann::json& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? -1.0 : it->get<double>();
}

job_record from_json(const nlohmann::json& o) {
  job_record j;
  j.id = o.value("id", "");
  j.name = o.value("name", "");
  j.state = job_state_from_name(o.value("state", "FAILED"));
  j.message = o.value("message", "");
  j.submitted_ms = o.value("submitted_ms", int64_t{0});
  j.started_ms = o.value("started_ms", int64_t{0});
  j.ended_ms = o.value("ended_ms", int64_t{0});
  j.steps = o.value("steps", int64_t{0});
  j.steps_total = o.value("steps_total", int64_t{0});
  j.samples = o.value("samples", int64_t{0});
  j.samples_per_sec = o.value("samples_per_sec", 0.0);
  j.loss = o.value("loss", 0.0);
  j.running_auc = o.value("running_auc", 0.0);
  j.test_auc = result_of(o, "test_auc");
  j.oracle_auc = result_of(o, "oracle_auc");
  j.test_logloss = result_of(o, "test_logloss");
  j.restarts = o.value("restarts", int64_t{0});
  j.head_restarts = o.value("head_restarts", int64_t{0});
  j.batches_replayed = o.value("batches_replayed", int64_t{0});
  j.checkpoints = o.value("checkpoints", int64_t{0});
  j.checkpoint_step = o.value("checkpoint_step", int64_t{-1});
  j.gradients_lost = o.value("gradients_lost", int64_t{0});
  j.last_failure = o.value("last_failure", "");
  j.validation_step = o.value("validation_step", int64_t{-1});
  j.validation_auc = result_of(o, "validation_auc");
  j.validation_logloss = result_of(o, "validation_logloss");
  j.best_step = o.value("best_step", int64_t{-1});
  j.best_validation_auc = result_of(o, "best_validation_auc");
  j.spec_yaml = o.value("spec_yaml", "");
  return j;
}

// A job that was running when the head stopped: queued again to resume from its newest
// checkpoint when it has one, else FAILED with the reason.
void requeue_or_fail(job_record& j) {
  auto spec = job_spec_defaults();
  std::string dir;
  if (!job_spec_load_text(j.spec_yaml, "job " + j.id, spec))
    dir = spec.checkpoint.dir.empty() ? spec.checkpoint.resume_from : spec.checkpoint.dir;
  auto latest = dir.empty() ? result<std::optional<checkpoint_meta>>(std::nullopt)
                            : checkpoint_latest(dir);
  if (latest && *latest) {
    spec.checkpoint.resume_from = dir;
    spec.checkpoint.dir = dir;
    j.spec_yaml = job_spec_to_yaml(spec);
    j.state = job_state::pending;
    j.message = "the head stopped while the job ran; resuming from its checkpoint at step "
                + std::to_string((*latest)->step);
    j.restarts += 1;
    j.head_restarts += 1;
    j.last_failure = "the head stopped";
    spdlog::warn("job_requeued id={} resume_step={} dir={}", j.id, (*latest)->step, dir);
    return;
  }
  j.state = job_state::failed;
  j.message = "the head stopped while the job ran (no checkpoint to resume from)";
  j.ended_ms = now_ms();
}

}  // namespace

nlohmann::json job_record_json(const job_record& j) {
  auto result = [](double x) { return x < 0 ? nlohmann::json() : nlohmann::json(x); };
  return {{"id", j.id},
          {"name", j.name},
          {"state", job_state_name(j.state)},
          {"message", j.message},
          {"submitted_ms", j.submitted_ms},
          {"started_ms", j.started_ms},
          {"ended_ms", j.ended_ms},
          {"steps", j.steps},
          {"steps_total", j.steps_total},
          {"samples", j.samples},
          {"samples_per_sec", j.samples_per_sec},
          {"loss", j.loss},
          {"running_auc", j.running_auc},
          {"test_auc", result(j.test_auc)},
          {"oracle_auc", result(j.oracle_auc)},
          {"restarts", j.restarts},
          {"head_restarts", j.head_restarts},
          {"batches_replayed", j.batches_replayed},
          {"checkpoints", j.checkpoints},
          {"checkpoint_step", j.checkpoint_step},
          {"gradients_lost", j.gradients_lost},
          {"last_failure", j.last_failure},
          {"validation_step", j.validation_step},
          {"validation_auc", result(j.validation_auc)},
          {"validation_logloss", result(j.validation_logloss)},
          {"best_step", j.best_step},
          {"best_validation_auc", result(j.best_validation_auc)},
          {"test_logloss", result(j.test_logloss)}};
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

void jobs_save(const admin_state& st) {
  if (st.config.state_dir.empty())
    return;
  nlohmann::json doc = {{"next_id", st.next_id}, {"jobs", nlohmann::json::array()}};
  for (auto& j : st.jobs) {
    auto o = job_record_json(j);
    o["spec_yaml"] = j.spec_yaml;
    doc["jobs"].push_back(std::move(o));
  }
  auto path = st.config.state_dir + "/jobs.json";
  auto tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << doc.dump(1) << "\n";
    if (!out) {
      spdlog::error("jobs_save_failed path={}", tmp);
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    spdlog::error("jobs_save_failed path={} what=rename", path);
}

void jobs_load(admin_state& st) {
  if (st.config.state_dir.empty())
    return;
  auto path = st.config.state_dir + "/jobs.json";
  std::ifstream in(path);
  if (!in)
    return;
  try {
    auto doc = nlohmann::json::parse(in);
    st.next_id = doc.value("next_id", int64_t{1});
    for (auto& o : doc.at("jobs")) {
      auto j = from_json(o);
      if (j.state == job_state::placing || j.state == job_state::running)
        requeue_or_fail(j);
      st.jobs.push_back(std::move(j));
    }
    spdlog::info("jobs_loaded path={} jobs={}", path, st.jobs.size());
  } catch (const std::exception& e) {
    spdlog::error("jobs_load_failed path={} error=\"{}\"", path, e.what());
  }
}

void job_apply_progress(job_record& j, const job_progress& p) {
  if (p.validation_step >= 0) {
    j.validation_step = p.validation_step;
    j.validation_auc = p.validation_auc;
    j.validation_logloss = p.validation_logloss;
    j.best_step = p.best_step;
    j.best_validation_auc = p.best_validation_auc;
  }
  j.steps = p.steps;
  j.steps_total = p.steps_total;
  j.samples = p.samples;
  j.samples_per_sec = p.samples_per_sec;
  j.loss = p.loss;
  j.running_auc = p.running_auc;
  j.restarts = p.restarts + j.head_restarts;  // the job's recoveries since it (re)started, plus the head's
  j.batches_replayed = p.batches_replayed;
  j.checkpoints = p.checkpoints;
  j.checkpoint_step = p.checkpoint_step;
  if (!p.last_failure.empty())
    j.last_failure = p.last_failure;
}

}  // namespace satrap
