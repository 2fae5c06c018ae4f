#include "actors/admin/admin_state.hpp"

#include "models/checkpoint/job_checkpoint.hpp"
#include "runtime/error.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <chrono>
#include <type_traits>

namespace satrap {

namespace {

// One field from JSON: a missing key keeps the default; a result's null reads as -1.
template <class T>
void field_from_json(const nlohmann::json& o, const record_field<T>& d, job_record& j) {
  auto it = o.find(d.name);
  if (it == o.end())
    return;
  if constexpr (std::is_same_v<T, job_state>) {
    j.*d.member = job_state_from_name(it->is_string() ? it->template get<std::string>() : "");
  } else {
    if constexpr (std::is_arithmetic_v<T>)
      if (d.use == field_use::result && it->is_null()) {
        j.*d.member = -1;
        return;
      }
    j.*d.member = it->template get<T>();
  }
}

// A job that was running when the head stopped: queued again to resume from its newest
// checkpoint when it has one, else FAILED with the reason.
void requeue_or_fail(const admin_state& st, job_record& j) {
  std::string dir;
  if (j.spec)
    dir = j.spec->checkpoint.dir.empty() ? j.spec->checkpoint.resume_from : j.spec->checkpoint.dir;
  auto latest =
    dir.empty() ? result<std::optional<checkpoint_meta>>(std::nullopt) : checkpoint_latest(dir);
  if (latest && *latest) {
    auto spec = *j.spec;
    spec.checkpoint.resume_from = dir;
    spec.checkpoint.dir = dir;
    j.spec_yaml = job_spec_to_yaml(spec);
    job_parse_spec(j);
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
  j.ended_ms = now_ms(st);
}

}  // namespace

nlohmann::json job_record_json(const job_record& j, bool with_stored) {
  auto o = nlohmann::json::object();
  for_each_job_field([&](const auto& d) {
    auto& v = j.*d.member;
    using T = std::decay_t<decltype(v)>;
    if (d.use == field_use::stored && !with_stored)
      return;
    if constexpr (std::is_same_v<T, job_state>) {
      o[d.name] = job_state_name(v);
    } else {
      if constexpr (std::is_arithmetic_v<T>)
        if (d.use == field_use::result && v < 0) {
          o[d.name] = nullptr;
          return;
        }
      o[d.name] = v;
    }
  });
  return o;
}

job_record job_record_from_json(const nlohmann::json& o) {
  job_record j;
  j.state = job_state::failed;  // a record without a state was damaged
  for_each_job_field([&](const auto& d) { field_from_json(o, d, j); });
  return j;
}

void job_parse_spec(job_record& j) {
  auto spec = job_spec_defaults();
  auto err = job_spec_load_text(j.spec_yaml, "job " + j.id, spec);
  if (!err)
    err = job_spec_finalize(spec);
  if (err) {
    j.spec.reset();
    j.spec_error = error_text(err);
    return;
  }
  j.spec = std::make_shared<const job_spec>(std::move(spec));
  j.spec_error.clear();
}

int64_t now_ms(const admin_state& st) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           st.config.environment->system_now().time_since_epoch())
    .count();
}

void jobs_save(const admin_state& st) {
  if (st.config.state_dir.empty())
    return;
  nlohmann::json doc = {{"next_id", st.next_id}, {"jobs", nlohmann::json::array()}};
  for (auto& j : st.jobs)
    doc["jobs"].push_back(job_record_json(j, true));
  auto path = st.config.state_dir + "/jobs.json";
  // Not synced, as before: the table is rewritten on every state change.
  if (auto r = st.config.environment->write_file_atomic(path, doc.dump(1) + "\n", false); !r)
    spdlog::error("jobs_save_failed path={} error=\"{}\"", path, r.error());
  // It holds every job's spec: the owner's only (the state dir is 0700 too, so the moment the
  // temporary file is written under the umask is covered).
  else if (::chmod(path.c_str(), 0600) != 0)
    spdlog::error("jobs_save_failed path={} error=\"cannot make it mode 0600\"", path);
}

void jobs_load(admin_state& st) {
  if (st.config.state_dir.empty())
    return;
  auto path = st.config.state_dir + "/jobs.json";
  auto text = st.config.environment->read_file(path);
  if (!text)
    return;
  try {
    auto doc = nlohmann::json::parse(text.value());
    st.next_id = doc.value("next_id", int64_t{1});
    for (auto& o : doc.at("jobs")) {
      auto j = job_record_from_json(o);
      job_parse_spec(j);
      if (j.state == job_state::placing || j.state == job_state::running)
        requeue_or_fail(st, j);
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
  j.restarts =
    p.restarts + j.head_restarts;  // the job's recoveries since it (re)started, plus the head's
  j.batches_replayed = p.batches_replayed;
  j.checkpoints = p.checkpoints;
  j.checkpoint_step = p.checkpoint_step;
  j.stream_lag = p.stream_lag;
  j.tier_hits = p.tier_hits;
  j.tier_misses = p.tier_misses;
  j.tier_prefetch_hits = p.tier_prefetch_hits;
  j.tier_bytes_read = p.tier_bytes_read;
  j.tier_bytes_written = p.tier_bytes_written;
  j.tier_ram_bytes = p.tier_ram_bytes;
  if (!p.last_failure.empty())
    j.last_failure = p.last_failure;
}

}  // namespace satrap
