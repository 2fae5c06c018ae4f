// job_record: what the admin knows of one job (its state, progress, results and spec), as the job
// table holds it, jobs.json stores it, /status and `satrap jobs --json` show it and CAF carries it
// to `satrap jobs`. Its fields are listed once, in job_record_fields(): the JSON (both ways) and
// CAF's inspect walk that table, so a new field is added in the struct and the table only.
// The parsed spec (`spec`) rides beside the YAML: parsed once when the job is accepted or loaded,
// neither stored nor sent (spec_yaml is).
// Threading: plain values.
#pragma once

#include "spec/job_spec.hpp"

#include <caf/meta/type_name.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

namespace satrap {

// The life of a job: PENDING (queued) -> PLACING -> RUNNING -> one of the three final states.
enum class job_state : uint8_t { pending, placing, running, succeeded, failed, cancelled };

// "PENDING", "RUNNING", ... (as /status, jobs.json and `satrap jobs` show it).
const char* job_state_name(job_state s);
// The state named `name`, or failed for a name no satrap wrote (a damaged job table).
job_state job_state_from_name(const std::string& name);
bool job_state_final(job_state s);

inline constexpr job_state all_job_states[] = {job_state::pending, job_state::placing,
                                               job_state::running, job_state::succeeded,
                                               job_state::failed,  job_state::cancelled};

struct job_record {
  std::string id;
  std::string name;
  job_state state = job_state::pending;
  std::string message;
  int64_t submitted_ms = 0;  // unix epoch milliseconds
  int64_t started_ms = 0;
  int64_t ended_ms = 0;
  int64_t steps = 0;
  int64_t steps_total = 0;
  int64_t samples = 0;
  double samples_per_sec = 0;
  double loss = 0;
  double running_auc = 0;
  double test_auc = -1;  // -1 until the job has finished
  double oracle_auc = -1;
  double test_logloss = -1;
  int64_t restarts = 0;          // recoveries: the job's own plus head_restarts
  int64_t head_restarts = 0;     // times the head stopped while the job ran (it was requeued)
  int64_t batches_replayed = 0;  // batches trained again after a rollback
  int64_t checkpoints = 0;       // checkpoints written
  int64_t checkpoint_step = -1;  // step of the newest
  int64_t gradients_lost = 0;    // gradient rows the stores dropped (not admitted)
  int64_t stream_lag = -1;       // a Kafka stream's messages not yet trained (-1: none / unknown)
  // The SSD tier's counters, summed over the shards (job_progress; tier_ram_bytes -1: no tier).
  int64_t tier_hits = 0;
  int64_t tier_misses = 0;
  int64_t tier_prefetch_hits = 0;
  int64_t tier_bytes_read = 0;
  int64_t tier_bytes_written = 0;
  int64_t tier_ram_bytes = -1;
  std::string last_failure;      // why the newest restart happened
  int64_t validation_step = -1;  // the latest validation (-1: none yet)
  double validation_auc = -1;    // its AUC and log loss (-1: none)
  double validation_logloss = -1;
  int64_t best_step = -1;  // the best validation's step
  double best_validation_auc = -1;
  // Several labels (data.labels): each task's test AUC by label, after the job (empty before, and
  // for one label: test_auc is then its AUC).
  std::map<std::string, double> task_test_auc;
  std::string spec_yaml;
  // spec_yaml parsed (loaded and finalized), once; null when it did not load, with the reason in
  // spec_error. Not in job_record_fields(): neither stored nor sent.
  std::shared_ptr<const job_spec> spec;
  std::string spec_error;
};

// How a field shows in JSON.
enum class field_use : uint8_t {
  plain,   // as it is
  result,  // a result not known yet (negative) is null, and null reads back as -1
  stored,  // in jobs.json only, not in /status or `satrap jobs --json`
};

template <class T>
struct record_field {
  const char* name;
  T job_record::*member;
  field_use use = field_use::plain;
};

template <class T>
constexpr record_field<T> record_field_of(const char* name, T job_record::*member,
                                          field_use use = field_use::plain) {
  return {name, member, use};
}

// Every field of job_record, in CAF's wire order.
inline const auto& job_record_fields() {
  using r = job_record;
  constexpr auto result = field_use::result;
  static const auto fields = std::make_tuple(
    record_field_of("id", &r::id), record_field_of("name", &r::name),
    record_field_of("state", &r::state), record_field_of("message", &r::message),
    record_field_of("submitted_ms", &r::submitted_ms),
    record_field_of("started_ms", &r::started_ms), record_field_of("ended_ms", &r::ended_ms),
    record_field_of("steps", &r::steps), record_field_of("steps_total", &r::steps_total),
    record_field_of("samples", &r::samples),
    record_field_of("samples_per_sec", &r::samples_per_sec), record_field_of("loss", &r::loss),
    record_field_of("running_auc", &r::running_auc),
    record_field_of("test_auc", &r::test_auc, result),
    record_field_of("oracle_auc", &r::oracle_auc, result),
    record_field_of("test_logloss", &r::test_logloss, result),
    record_field_of("restarts", &r::restarts), record_field_of("head_restarts", &r::head_restarts),
    record_field_of("batches_replayed", &r::batches_replayed),
    record_field_of("checkpoints", &r::checkpoints),
    record_field_of("checkpoint_step", &r::checkpoint_step),
    record_field_of("gradients_lost", &r::gradients_lost),
    record_field_of("stream_lag", &r::stream_lag), record_field_of("tier_hits", &r::tier_hits),
    record_field_of("tier_misses", &r::tier_misses),
    record_field_of("tier_prefetch_hits", &r::tier_prefetch_hits),
    record_field_of("tier_bytes_read", &r::tier_bytes_read),
    record_field_of("tier_bytes_written", &r::tier_bytes_written),
    record_field_of("tier_ram_bytes", &r::tier_ram_bytes),
    record_field_of("last_failure", &r::last_failure),
    record_field_of("validation_step", &r::validation_step),
    record_field_of("validation_auc", &r::validation_auc, result),
    record_field_of("validation_logloss", &r::validation_logloss, result),
    record_field_of("best_step", &r::best_step),
    record_field_of("best_validation_auc", &r::best_validation_auc, result),
    record_field_of("task_test_auc", &r::task_test_auc),
    record_field_of("spec_yaml", &r::spec_yaml, field_use::stored));
  return fields;
}

// f(descriptor) for every field, in order.
template <class F>
void for_each_job_field(F&& f) {
  std::apply([&](const auto&... d) { (f(d), ...); }, job_record_fields());
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_record& x) {
  return std::apply(
    [&](const auto&... d) { return f(caf::meta::type_name("job_record"), (x.*d.member)...); },
    job_record_fields());
}

// A job record as JSON, for /status and `satrap jobs --json` (with_stored: for jobs.json, with
// its spec); results not known yet (negative) are null.
nlohmann::json job_record_json(const job_record& j, bool with_stored = false);
// The record a job_record_json(j, true) wrote; a missing field keeps its default, a missing
// state reads as FAILED. The spec is not parsed here.
job_record job_record_from_json(const nlohmann::json& o);

}  // namespace satrap
