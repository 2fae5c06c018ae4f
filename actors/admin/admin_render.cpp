#include "actors/admin/admin_state.hpp"
#include "actors/peer_guard.hpp"
#include "runtime/frame_limit.hpp"
#include "runtime/http_server.hpp"
#include "runtime/peer_identity.hpp"

#include "runtime/error.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

namespace satrap {

void latency_histogram::observe(double seconds, int64_t times) {
  size_t b = 0;
  while (b < std::size(bounds) && seconds > bounds[b])
    ++b;
  counts[b] += times;
  sum += seconds * static_cast<double>(times);
  count += times;
}

namespace {

nlohmann::json node_json(const admin_state& st, const node_spec& spec, const actor_demand& used,
                         std::chrono::steady_clock::time_point now) {
  auto it = st.nodes.find(spec.name);
  bool joined = it != st.nodes.end();
  nlohmann::json j = {
    {"name", spec.name},
    {"host", spec.host},
    {"port", spec.port},
    {"resources",
     {{"cores", spec.resources.cores},
      {"memory_bytes", spec.resources.memory_bytes},
      {"gpus", spec.resources.gpus}}},
    {"used", {{"cores", used.cores}, {"memory_bytes", used.memory_bytes}, {"gpus", used.gpus}}},
    {"labels", spec.labels},
    {"joined", joined},
    {"alive", joined && it->second.alive},
    {"heartbeats", joined ? it->second.heartbeats : 0},
    // Process restarts: as its supervisor counted them, and new processes this head saw join.
    {"restarts", joined ? it->second.info.restarts : 0},
    {"rejoins", joined ? it->second.rejoins : 0},
  };
  if (auto g = st.supervisor_gave_up.find(spec.name); g != st.supervisor_gave_up.end())
    j["supervisor"] = {{"gave_up", true}, {"reason", g->second}};
  if (joined)
    j["last_heartbeat_ms_ago"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second.last_heartbeat)
        .count();
  return j;
}

// What `satrap plan` prints for a job, as JSON: per node its actors by role and what they use.
nlohmann::json pending_plan_json(const admin_state& st, const job_record& j) {
  auto& m = st.config.cluster;
  if (!j.spec)
    return {{"error", j.spec_error}};
  auto plan = plan_job(m, *j.spec);
  if (!plan)
    return {{"error", error_text(plan.error())}};
  std::vector<std::map<std::string, int64_t>> roles(m.nodes.size());
  for (auto& a : plan->actors)
    ++roles[a.node][to_string(a.role)];
  nlohmann::json nodes = nlohmann::json::array();
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    auto& u = plan->node_use[i];
    auto& r = m.nodes[i].resources;
    nodes.push_back({{"node", m.nodes[i].name},
                     {"actors", roles[i]},
                     {"memory_bytes", u.memory_bytes},
                     {"memory_of", r.memory_bytes},
                     {"cores", u.cores},
                     {"cores_of", r.cores},
                     {"gpus", u.gpus},
                     {"gpus_of", r.gpus}});
  }
  return {{"nodes", nodes},
          {"embedding_rows", plan->embedding_rows},
          {"embedding_parameters", plan->embedding_parameters},
          {"dense_parameters", plan->dense_parameters},
          {"network_bytes_per_step", plan->traffic.total()}};
}

}  // namespace

void history_record(admin_state& st, const job_record& j) {
  job_history_sample s;
  s.t_ms = now_ms(st);
  s.step = j.steps;
  s.loss = j.loss;
  s.samples_per_sec = j.samples_per_sec;
  s.running_auc = j.running_auc;
  s.checkpoints = j.checkpoints;
  s.restarts = j.restarts;
  s.last_failure = j.last_failure;
  st.history[j.id].record(s);
  // Keep the newest jobs' histories only (job ids are in submission order in st.jobs).
  for (auto& old : st.jobs) {
    if (st.history.size() <= admin_state::history_jobs)
      break;
    if (old.id != j.id)
      st.history.erase(old.id);
  }
}

std::string render_status(const admin_state& st, std::chrono::steady_clock::time_point now) {
  auto& m = st.config.cluster;
  std::map<std::string, actor_demand> used;
  nlohmann::json actors = nlohmann::json::array();
  if (st.running) {
    auto& r = *st.running;
    for (size_t i = 0; i < r.plan.node_use.size(); ++i)
      used[r.plan_nodes[i]] = r.plan.node_use[i];
  }
  // The actors each live node reported with its last heartbeat: where they really run (after a
  // recovery too), their mailbox depth and messages/s.
  for (auto& [name, n] : st.nodes) {
    if (!n.alive)
      continue;
    for (auto& a : n.actors) {
      std::string job = a.stat.job;
      for (auto& j : st.jobs)
        if (j.name == a.stat.job && st.running && st.running->id == j.id)
          job = j.id;
      actors.push_back({{"role", a.stat.role},
                        {"index", a.stat.index},
                        {"node", name},
                        {"job", job},
                        {"state", "running"},
                        {"mailbox", a.stat.mailbox},
                        {"messages_total", a.stat.messages},
                        {"messages_per_sec", a.messages_per_sec}});
    }
  }
  nlohmann::json doc = {{"cluster", m.cluster},
                        {"version", st.config.version},
                        {"nodes", nlohmann::json::array()},
                        {"actors", actors},
                        {"jobs", nlohmann::json::array()}};
  if (st.config.embedded
        .on) {  // `satrap train`: the page says so, and shows no controls if read-only
    doc["embedded"] = true;
    doc["read_only"] = st.config.embedded.read_only;
  }
  for (auto& n : m.nodes)
    doc["nodes"].push_back(node_json(st, n, used[n.name], now));
  bool planned = false;
  for (auto& j : st.jobs) {
    auto jj = job_record_json(j);
    if (auto h = st.history.find(j.id); h != st.history.end())
      jj["history"] = h->second.to_json();
    if (j.state == job_state::pending && !planned) {  // the next job to run: where it would go
      jj["plan"] = pending_plan_json(st, j);
      planned = true;
    }
    doc["jobs"].push_back(std::move(jj));
  }
  return doc.dump();
}

namespace {
struct per_job_tier {
  const char* name;
  const char* help;
  int64_t job_record::*field;
};
}  // namespace

std::string render_metrics(const admin_state& st) {
  std::ostringstream os;
  auto gauge = [&](const char* name, const char* help) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n";
  };
  auto counter = [&](const char* name, const char* help) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n";
  };
  int64_t alive = 0, heartbeats = 0;
  for (auto& [_, n] : st.nodes) {
    alive += n.alive ? 1 : 0;
    heartbeats += n.heartbeats;
  }
  gauge("satrap_nodes", "Nodes in the manifest.");
  os << "satrap_nodes " << st.config.cluster.nodes.size() << "\n";
  gauge("satrap_nodes_alive", "Nodes whose heartbeats arrive.");
  os << "satrap_nodes_alive " << alive << "\n";
  counter("satrap_heartbeats_total", "Heartbeats received from nodes.");
  os << "satrap_heartbeats_total " << heartbeats << "\n";
  counter("satrap_registrations_refused_total", "Nodes refused at registration.");
  os << "satrap_registrations_refused_total " << st.registrations_refused << "\n";
  counter("satrap_admin_requests_refused_total", "Submit or cancel requests with a wrong token.");
  os << "satrap_admin_requests_refused_total " << st.requests_refused << "\n";
  counter("satrap_node_restarts_total", "Restarts of a node's process by its supervisor.");
  for (auto& [name, n] : st.nodes)
    os << "satrap_node_restarts_total{node=\"" << name << "\"} " << n.info.restarts << "\n";
  counter("satrap_node_rejoins_total", "A node's registrations from a new process.");
  for (auto& [name, n] : st.nodes)
    os << "satrap_node_rejoins_total{node=\"" << name << "\"} " << n.rejoins << "\n";
  gauge("satrap_node_supervisor_gave_up", "1 when a node's supervisor stopped restarting it.");
  for (auto& n : st.config.cluster.nodes)
    os << "satrap_node_supervisor_gave_up{node=\"" << n.name << "\"} "
       << st.supervisor_gave_up.count(n.name) << "\n";
  counter("satrap_requests_refused_total",
          "Remote requests refused (unauthorised or forged), by what was asked.");
  for (auto& [what, n] : st.refused)
    os << "satrap_requests_refused_total{request=\"" << what << "\"} " << n << "\n";
  counter("satrap_remote_exits_dropped_total", "Exit messages from other processes, dropped.");
  os << "satrap_remote_exits_dropped_total " << exits_dropped() << "\n";
  counter("satrap_frames_refused_total", "CAF frames over security.max_frame_bytes, refused.");
  os << "satrap_frames_refused_total " << frames_refused() << "\n";
  counter("satrap_peer_refused_total",
          "CAF handshakes refused and messages dropped by the certificate binding, by reason.");
  for (auto& [reason, n] : peer_refusals())
    os << "satrap_peer_refused_total{reason=\"" << reason << "\"} " << n << "\n";
  counter("satrap_http_refused_total",
          "HTTP connections closed: over the per-address cap, or past the request deadline.");
  auto http = http_guard_refusals();
  os << "satrap_http_refused_total{reason=\"connections_per_address\"} " << http.over_address_cap
     << "\n";
  os << "satrap_http_refused_total{reason=\"request_deadline\"} " << http.past_deadline << "\n";
  gauge("satrap_jobs", "Jobs by state.");
  for (auto state : all_job_states) {
    int64_t n = 0;
    for (auto& j : st.jobs)
      n += j.state == state ? 1 : 0;
    os << "satrap_jobs{state=\"" << job_state_name(state) << "\"} " << n << "\n";
  }
  counter("satrap_job_samples_total", "Training samples processed, per job.");
  for (auto& j : st.jobs)
    os << "satrap_job_samples_total{job=\"" << j.id << "\"} " << j.samples << "\n";
  gauge("satrap_job_samples_per_second", "Training throughput, per job.");
  for (auto& j : st.jobs)
    os << "satrap_job_samples_per_second{job=\"" << j.id << "\"} " << j.samples_per_sec << "\n";
  gauge("satrap_job_stream_lag_messages",
        "A stream job's messages not yet trained (behind the partitions' ends), per job; -1: "
        "not a stream or not known yet. Its consumption rate is satrap_job_samples_per_second.");
  for (auto& j : st.jobs)
    os << "satrap_job_stream_lag_messages{job=\"" << j.id << "\"} " << j.stream_lag << "\n";
  // The SSD tier (issue 48): jobs with model.embedding.tier ssd only, summed over their shards.
  for (auto [name, help, field] :
       {per_job_tier{"satrap_job_tier_hits_total", "SSD tier: ids found in RAM, per job.",
                     &job_record::tier_hits},
        per_job_tier{"satrap_job_tier_misses_total",
                     "SSD tier: ids absent from RAM (read from disk or new), per job.",
                     &job_record::tier_misses},
        per_job_tier{"satrap_job_tier_prefetch_hits_total",
                     "SSD tier: rows from disk a prefetch had staged before their lookup, per job.",
                     &job_record::tier_prefetch_hits},
        per_job_tier{"satrap_job_tier_read_bytes_total",
                     "SSD tier: row bytes read from the cold stores, per job.",
                     &job_record::tier_bytes_read},
        per_job_tier{"satrap_job_tier_written_bytes_total",
                     "SSD tier: row bytes written to the cold stores, per job.",
                     &job_record::tier_bytes_written}}) {
    counter(name, help);
    for (auto& j : st.jobs)
      if (j.tier_ram_bytes >= 0)
        os << name << "{job=\"" << j.id << "\"} " << j.*field << "\n";
  }
  gauge("satrap_job_tier_ram_bytes",
        "SSD tier: RAM of the hot rows, staged and pending rows and the cold stores, per job.");
  for (auto& j : st.jobs)
    if (j.tier_ram_bytes >= 0)
      os << "satrap_job_tier_ram_bytes{job=\"" << j.id << "\"} " << j.tier_ram_bytes << "\n";
  gauge("satrap_job_loss", "Mean training loss since the previous progress report, per job.");
  for (auto& j : st.jobs)
    os << "satrap_job_loss{job=\"" << j.id << "\"} " << j.loss << "\n";
  gauge("satrap_job_running_auc", "AUC over recent training predictions, per job.");
  for (auto& j : st.jobs)
    os << "satrap_job_running_auc{job=\"" << j.id << "\"} " << j.running_auc << "\n";
  gauge("satrap_job_validation_auc",
        "AUC on the validation split at the latest validation, per job.");
  for (auto& j : st.jobs)
    if (j.validation_step >= 0)
      os << "satrap_job_validation_auc{job=\"" << j.id << "\"} " << j.validation_auc << "\n";
  gauge("satrap_job_validation_logloss",
        "Log loss on the validation split at the latest validation, per job.");
  for (auto& j : st.jobs)
    if (j.validation_step >= 0)
      os << "satrap_job_validation_logloss{job=\"" << j.id << "\"} " << j.validation_logloss
         << "\n";
  gauge("satrap_job_best_validation_auc", "The best validation AUC so far, per job.");
  for (auto& j : st.jobs)
    if (j.best_step >= 0)
      os << "satrap_job_best_validation_auc{job=\"" << j.id << "\"} " << j.best_validation_auc
         << "\n";
  // Supervision: recoveries and what they cost (actors/job_supervisor/job_supervisor.hpp).
  struct per_job {
    const char* name;
    const char* help;
    int64_t job_record::*field;
  };
  for (auto [name, help, field] :
       {per_job{"satrap_job_restarts_total", "Recoveries of the job's actors after a failure.",
                &job_record::restarts},
        per_job{"satrap_job_batches_replayed_total",
                "Batches rolled back to a checkpoint and trained again.",
                &job_record::batches_replayed},
        per_job{"satrap_job_checkpoints_total", "Checkpoints written.", &job_record::checkpoints},
        per_job{"satrap_job_gradients_lost_total",
                "Gradient rows dropped by the stores (ids not admitted).",
                &job_record::gradients_lost}}) {
    counter(name, help);
    for (auto& j : st.jobs)
      os << name << "{job=\"" << j.id << "\"} " << j.*field << "\n";
  }
  os << "# HELP satrap_step_latency_seconds Time per training step (between progress reports).\n"
        "# TYPE satrap_step_latency_seconds histogram\n";
  int64_t cumulative = 0;
  auto& h = st.step_latency;
  for (size_t b = 0; b < std::size(h.bounds); ++b) {
    cumulative += h.counts[b];
    os << "satrap_step_latency_seconds_bucket{le=\"" << h.bounds[b] << "\"} " << cumulative << "\n";
  }
  os << "satrap_step_latency_seconds_bucket{le=\"+Inf\"} " << h.count << "\n";
  os << "satrap_step_latency_seconds_sum " << h.sum << "\n";
  os << "satrap_step_latency_seconds_count " << h.count << "\n";
  return os.str();
}

}  // namespace satrap
