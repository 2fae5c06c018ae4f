// satrap_sim: a deterministic simulation of a whole small job on a cluster of simulated nodes.
//
// One seed draws everything: the job (trainers, staleness, checkpoint interval), which ready actor
// handles its next message, how much simulated time each message takes, and the faults. All actors
// run in this one thread on CAF's test coordinator (scheduler.policy = testing); delayed messages
// and request timeouts run on its test clock, which only the simulator moves. The middleman is not
// used: every "node" is a real node agent plus the actors it spawned, and a simulated node process
// (register, heartbeats every cluster_timing.heartbeat_interval_ms) talking to a real admin, which
// is the job's node directory for re-placement. The real job supervisor runs the job. Its files
// (checkpoints, snapshots, audit ledgers) live in a memory_env (models/memory_env.hpp) of the
// run: no fsync is paid, nothing is left on disk, and the disk can fail; its clocks move with
// the test clock.
//
// Faults (drawn from the seed, printed with --seed S):
//   crash   - an actor (shard, aggregator, loader, trainer) crashes before its N-th message;
//   stall   - an actor handles nothing for a while (a slow process or a delayed reply);
//   cut     - a shard crashes on the snapshot request of a checkpoint cut;
//   loss    - a node is lost: its agent and every actor it spawned end as unreachable, its
//             heartbeats stop; it comes back (a new process) some seconds later;
//   pause   - a node's heartbeats stop for a while (past the heartbeat timeout the admin calls it
//             dead while its actors run on: a recovery in that time re-places without it);
//   full    - the disk fills up at a step (no byte more fits): the next checkpoint write fails
//             with ENOSPC;
//   fsync   - the next 1-2 fsyncs fail with EIO (a checkpoint's shard file, manifest or dense
//             state, whichever syncs next).
// Not simulated: dropping a single reply (CAF's transport does not lose single messages: a lost
// connection ends every actor behind it, which `loss` covers), a restart of the head (the admin's
// job table lives on disk and the cluster tests cover it).
//
// Invariants checked after each run (the one that broke is named):
//   ended           - the job ended SUCCEEDED, or FAILED with a reason, within the simulated-time
//                     and step bounds; with no fault it must have SUCCEEDED;
//   exactly_once    - in the final shards' audit ledgers (which travel with the checkpoints),
//                     every training batch's gradient was applied at most once per shard, and every
//                     training batch on at least one shard;
//   staleness       - no shard saw an update of a step more than `staleness` steps behind a lookup;
//   reference_loss  - at staleness 0 with one trainer, the loss trajectory equals the plain
//                     reference loop (models/reference_trainer), faults or not;
//   result          - the result reports as many restarts as the supervisor began;
//   replay          - (--seed) a second run of the seed gives the same trace digest;
//   disk            - as the real code does: a full disk (ENOSPC: no_resource) never restarts the
//                     job; alone, it fails the job with the cause. A failed fsync (EIO:
//                     io_failure) in a shard's snapshot restarts the job from the previous
//                     checkpoint, in the supervisor's own files it fails the job; alone, the job
//                     SUCCEEDED after a restart or FAILED naming the checkpoint and the EIO.
//
// Usage: satrap_sim --seeds N [--first S]   runs seeds S..S+N-1 and ends with
//          seeds=N failures=F first_failure=<seed or none> sim_steps=<messages handled>
//        satrap_sim --seed S [--trace]      replays one seed, prints its job, its faults and what
//                                           the injector did; runs it twice and compares.
#include "actors/admin/admin.hpp"
#include "actors/job_supervisor/job_supervisor.hpp"
#include "actors/node_agent/node_agent.hpp"
#include "actors/type_registry.hpp"
#include "models/memory_env.hpp"
#include "models/reference_trainer.hpp"
#include "runtime/error.hpp"
#include "spec/job_spec.hpp"
#include "spec/placement.hpp"

#include <caf/detail/test_actor_clock.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <cblas.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <cerrno>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace satrap;

namespace {

// ---- the seed's randomness ------------------------------------------------------------------

// splitmix64: the same numbers on every platform and standard library.
struct sim_rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
};

// FNV-1a over the trace: two runs of one seed must give the same digest.
struct digest {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i)
      h = (h ^ b[i]) * 1099511628211ull;
  }
  void add(uint64_t x) { add(&x, sizeof x); }
  void add(const std::string& s) { add(s.data(), s.size()); }
};

// ---- log capture: the shards' staleness_violated events ---------------------------------------

struct capture_sink final : spdlog::sinks::base_sink<spdlog::details::null_mutex> {
  int64_t staleness_violations = 0;
  int64_t restarts = 0;                     // job_restarting events
  std::vector<std::string> restart_events;  // their texts (with the reason)
  int64_t failures_after_training = 0;      // job_failure_after_training events (not recovered)
  std::vector<std::string> errors;
  bool echo = false;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string text(msg.payload.data(), msg.payload.size());
    if (text.rfind("staleness_violated", 0) == 0)
      ++staleness_violations;
    if (text.rfind("job_restarting", 0) == 0) {
      ++restarts;
      restart_events.push_back(text);
    }
    if (text.rfind("job_failure_after_training", 0) == 0)
      ++failures_after_training;
    if (msg.level >= spdlog::level::err && errors.size() < 20)
      errors.push_back(text);
    if (echo)
      std::fprintf(stderr, "    log %s\n", text.c_str());
  }
  void flush_() override {}
};

// ---- the simulated cluster --------------------------------------------------------------------

constexpr int sim_nodes = 3;

struct fault {
  enum kind_t { crash, stall, cut, loss, pause, full, fsync } kind;
  std::string role;       // crash, stall, cut: the role ("embedding_shard", ...)
  int32_t index = 0;      // its index
  int64_t nth = 0;        // crash: before its nth message; stall/loss/pause: at this sim step
  int32_t node = 0;       // loss, pause
  int64_t length_ms = 0;  // stall, pause: how long; loss: until the node is back
  bool done = false;
  std::string text() const {
    char buf[200];
    switch (kind) {
      case crash:
        std::snprintf(buf, sizeof buf, "crash %s[%d] before its message %lld", role.c_str(), index,
                      (long long)nth);
        break;
      case stall:
        std::snprintf(buf, sizeof buf, "stall %s[%d] at step %lld for %lld ms", role.c_str(), index,
                      (long long)nth, (long long)length_ms);
        break;
      case cut:
        std::snprintf(buf, sizeof buf, "crash %s[%d] on its snapshot request (checkpoint cut)",
                      role.c_str(), index);
        break;
      case loss:
        std::snprintf(buf, sizeof buf, "lose node n%d at step %lld, back after %lld ms", node,
                      (long long)nth, (long long)length_ms);
        break;
      case pause:
        std::snprintf(buf, sizeof buf, "pause heartbeats of node n%d at step %lld for %lld ms",
                      node, (long long)nth, (long long)length_ms);
        break;
      case full:
        std::snprintf(buf, sizeof buf, "fill the disk at step %lld", (long long)nth);
        break;
      case fsync:
        std::snprintf(buf, sizeof buf, "fail the next %d fsyncs from step %lld", index,
                      (long long)nth);
        break;
    }
    return buf;
  }
};

struct spawned {
  caf::resumable* job = nullptr;  // the actor as the scheduler sees it
  caf::actor actor;
  std::string role;
  int32_t index;
  int32_t node;
  int64_t messages = 0;  // handled so far (as counted by the simulator)
};

struct sim_run {
  uint64_t seed = 0;
  bool trace = false;
  job_spec spec;
  std::vector<fault> faults;
  // Outcome.
  std::optional<job_result> result;
  std::string failure;  // the job's error, if it failed
  bool ended = false;
  int64_t sim_steps = 0;
  int64_t sim_ms = 0;
  std::vector<std::string> broken;    // invariants broken, with details
  std::vector<std::string> injected;  // what the injector did
  uint64_t trace_digest = 0;
  bool reference_checked = false;
  bool ledger_unreadable = false;  // the final shards' node was lost after the job's result
  bool disk_fault_met = false;     // a write met the full disk or an fsync failed
};

void say(sim_run& run, const std::string& what, int64_t step, int64_t now_ms) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "[step %lld t=%lldms] ", (long long)step, (long long)now_ms);
  run.injected.push_back(buf + what);
  if (run.trace)
    std::fprintf(stderr, "  inject %s%s\n", buf, what.c_str());
}

job_spec sim_job(sim_rng& rng, const std::string& ckpt_dir) {
  auto spec = job_spec_defaults();
  spec.name = "sim";
  spec.data.synthetic.slots = 3;
  spec.data.synthetic.vocab = 200;
  spec.data.synthetic.dense_features = 4;
  spec.data.synthetic.seed = 1000 + rng.below(1000);
  spec.model.network.dim = 4;
  spec.training.batch_size = 8;
  spec.placement.trainers = 1 + static_cast<int32_t>(rng.below(2));
  spec.training.train_batches = 12 * spec.placement.trainers;
  spec.training.test_batches = 2;
  spec.training.staleness = static_cast<int32_t>(rng.below(3));
  spec.training.progress_every = 4;
  spec.training.seed = 7 + rng.below(100);
  spec.placement.shards = 2;
  spec.placement.aggregators = 1 + static_cast<int32_t>(rng.below(2));
  spec.placement.loaders = 1 + static_cast<int32_t>(rng.below(2));
  spec.placement.partitions = 16;
  spec.checkpoint.dir = ckpt_dir;
  spec.checkpoint.every_steps = std::array<int64_t, 3>{0, 3, 5}[rng.below(3)];
  spec.checkpoint.full_every = 2;
  spec.supervision.max_restarts = 4;
  return spec;
}

// Drawn from a stream of their own, so that adding them kept the jobs and faults of the
// regression seeds: timed checkpoints, and timeouts short enough that a stall can hit them.
void sim_timing(uint64_t seed, job_spec& spec) {
  sim_rng rng{seed ^ 0x5EEDF00DBA5Eull};
  spec.checkpoint.every_seconds = std::array<int32_t, 3>{0, 0, 1}[rng.below(3)];
  auto& t = spec.timing;
  t.trainer_request_timeout_ms = 2000 + static_cast<int64_t>(rng.below(20000));
  t.shard_request_timeout_ms = 1000 + static_cast<int64_t>(rng.below(10000));
  t.hold_timeout_ms = 1000 + static_cast<int64_t>(rng.below(10000));
  t.spawn_timeout_ms = 2000 + static_cast<int64_t>(rng.below(10000));
  t.replan_delay_ms = static_cast<int64_t>(rng.below(3000));
}

manifest sim_manifest() {
  manifest m;
  m.cluster = "sim";
  for (int i = 0; i < sim_nodes; ++i) {
    node_spec n;
    n.name = "n" + std::to_string(i);
    n.host = "sim";
    n.port = static_cast<uint16_t>(5000 + i);
    n.resources.cores = 64;
    n.resources.memory_bytes = uint64_t{64} << 30;
    m.nodes.push_back(n);
  }
  return m;
}

std::vector<fault> draw_faults(sim_rng& rng) {
  std::vector<fault> out;
  if (rng.chance(0.3))
    return out;  // a share of the seeds run undisturbed: the reference-loss check needs them
  static const char* roles[] = {"embedding_shard", "gradient_aggregator", "data_loader",
                                "dense_trainer"};
  auto n = 1 + rng.below(3);
  for (uint64_t i = 0; i < n; ++i) {
    fault f{};
    auto k = rng.below(10);
    f.kind = k < 3   ? fault::crash
             : k < 5 ? fault::stall
             : k < 6 ? fault::cut
             : k < 8 ? fault::loss
                     : fault::pause;
    f.role = f.kind == fault::cut ? "embedding_shard" : roles[rng.below(4)];
    f.index = static_cast<int32_t>(rng.below(2));
    f.node = static_cast<int32_t>(rng.below(sim_nodes));
    switch (f.kind) {
      case fault::crash: f.nth = 1 + static_cast<int64_t>(rng.below(60)); break;
      case fault::stall:
        f.nth = static_cast<int64_t>(rng.below(700));
        f.length_ms = 100 + static_cast<int64_t>(rng.below(20000));
        break;
      case fault::cut: break;
      case fault::loss:
        f.nth = static_cast<int64_t>(rng.below(700));
        f.length_ms = 500 + static_cast<int64_t>(rng.below(8000));
        break;
      case fault::pause:
        f.nth = static_cast<int64_t>(rng.below(700));
        f.length_ms = 100 + static_cast<int64_t>(rng.below(8000));
        break;
    }
    out.push_back(f);
  }
  return out;
}

// Disk faults, from a stream of their own (the jobs and other faults of the regression seeds
// stay as they were): a fifth of the seeds get one, at a step.
void draw_disk_fault(uint64_t seed, std::vector<fault>& faults) {
  sim_rng rng{seed ^ 0xD15CFA175EEDull};
  if (!rng.chance(0.2))
    return;
  fault f{};
  f.kind = rng.chance(0.5) ? fault::full : fault::fsync;
  f.nth = static_cast<int64_t>(rng.below(400));      // most runs take 300-900 steps
  f.index = 1 + static_cast<int32_t>(rng.below(2));  // fsync: how many fail
  faults.push_back(f);
}

// The test clock's schedule is protected; read its earliest entry through a member pointer taken
// in a derived class (no copy, no cast of the object).
struct clock_peek : caf::detail::test_actor_clock {
  static std::optional<time_point> next(caf::detail::test_actor_clock& c) {
    auto& s = c.*(&clock_peek::schedule_);
    if (s.empty())
      return std::nullopt;
    return s.begin()->first;
  }
};

// A simulated node process (`proc`): registers its agent with the admin, then sends heartbeats on
// the clock. `up` false: its process died; until `paused_until_ms` it skips heartbeats.
struct sim_node {
  node_agent_actor agent;
  caf::actor proc;
  bool up = false;
  int64_t back_at_ms = -1;  // a lost node comes back then
  int64_t paused_until_ms = -1;
};

// Ends `a` with `reason` before anything else in its mailbox: the exit message goes to the
// urgent queue (a crash does not wait for the actor's backlog), then the actor runs once.
void exit_now(caf::scheduler::test_coordinator& sched, const caf::actor& a, caf::error reason) {
  auto ptr = caf::actor_cast<caf::strong_actor_ptr>(a);
  if (!ptr)
    return;
  ptr->enqueue(ptr, caf::make_message_id(caf::message_priority::high),
               caf::make_message(caf::exit_msg{a.address(), std::move(reason)}), nullptr);
  if (sched.prioritize(a))
    sched.run_once();
}

class simulation {
 public:
  simulation(sim_run& run, caf::actor_system& sys, caf::scheduler::test_coordinator& sched,
             capture_sink& sink, memory_env& files)
      : run_(run),
        sys_(sys),
        sched_(sched),
        sink_(sink),
        files_(files),
        rng_{run.seed * 0x2545F4914F6CDD1Dull + 1} {}

  // Moves the test clock and the files' clocks together.
  void advance(std::chrono::milliseconds by) {
    sched_.advance_time(by);
    files_.advance(by);
  }

  int64_t now_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
             sched_.clock().current_time.time_since_epoch())
             .count()
           - start_ms_;
  }

  void start_node(int32_t i) {
    auto& n = nodes_[static_cast<size_t>(i)];
    node_agent_config c;
    c.node = "n" + std::to_string(i);
    c.audit = true;
    c.environment = &files_;
    c.on_spawn = [this, i](const caf::actor& a, const char* role, int32_t index) {
      auto* job = dynamic_cast<caf::resumable*>(caf::actor_cast<caf::abstract_actor*>(a));
      by_job_[job] = actors_.size();
      actors_.push_back({job, a, role, index, i, 0});
    };
    n.agent = spawn_node_agent(sys_, c);
    auto admin = admin_;
    auto name = c.node;
    auto agent = n.agent;
    auto interval = ms(manifest_.timing.heartbeat_interval_ms);
    n.proc = sys_.spawn(
      [admin, name, agent, interval, this, i](caf::event_based_actor* self) -> caf::behavior {
        self->send(admin, register_atom::value,
                   node_info{"sim", "sim", name, agent, "token-" + name});
        self->delayed_send(self, interval, heartbeat_atom::value);
        return {
          [=, this](heartbeat_atom) {
            if (now_ms() >= nodes_[static_cast<size_t>(i)].paused_until_ms)
              self->send(admin, heartbeat_atom::value, name, std::vector<actor_stat>{});
            self->delayed_send(self, interval, heartbeat_atom::value);
          },
          [](const std::string&) {},  // the admin's answer to register
        };
      });
    n.up = true;
  }

  void lose_node(int32_t i, int64_t back_after_ms) {
    auto& n = nodes_[static_cast<size_t>(i)];
    if (!n.up)
      return;
    n.up = false;
    n.back_at_ms = now_ms() + back_after_ms;
    std::vector<caf::actor> victims{caf::actor_cast<caf::actor>(n.agent), n.proc};
    for (auto& a : actors_)
      if (a.node == i && a.actor)
        victims.push_back(a.actor);
    for (auto& v : victims)  // lost at once
      exit_now(sched_, v, caf::exit_reason::remote_link_unreachable);
  }

  // The actor the scheduler's job at `i` belongs to, if it is one of the job's.
  // (Every spawned actor's handle is kept, so no other actor reuses its address.)
  spawned* role_actor(caf::resumable* job) {
    auto it = by_job_.find(job);
    return it == by_job_.end() ? nullptr : &actors_[it->second];
  }

  bool stalled(spawned* a) {
    if (!a)
      return false;
    auto it = stalled_until_.find(a->actor.id());
    return it != stalled_until_.end() && now_ms() < it->second;
  }

  void crash(spawned& a, const std::string& why) {
    say(run_,
        why + ": " + a.role + "[" + std::to_string(a.index) + "] on n" + std::to_string(a.node),
        run_.sim_steps, now_ms());
    exit_now(sched_, a.actor, caf::make_error(caf::sec::runtime_error, "sim: injected crash"));
  }

  // Faults that fire at a step (stall, loss, pause), and lost nodes coming back.
  void timed_faults() {
    for (auto& f : run_.faults) {
      if (f.done || f.nth > run_.sim_steps)
        continue;
      if (f.kind == fault::stall) {
        for (auto it = actors_.rbegin(); it != actors_.rend(); ++it)  // the newest such actor
          if (auto& a = *it; a.actor && a.role == f.role && a.index == f.index) {
            stalled_until_[a.actor.id()] = now_ms() + f.length_ms;
            say(run_, f.text(), run_.sim_steps, now_ms());
            f.done = true;
            break;
          }
      } else if (f.kind == fault::loss) {
        say(run_, f.text(), run_.sim_steps, now_ms());
        lose_node(f.node, f.length_ms);
        f.done = true;
      } else if (f.kind == fault::pause) {
        say(run_, f.text(), run_.sim_steps, now_ms());
        nodes_[static_cast<size_t>(f.node)].paused_until_ms = now_ms() + f.length_ms;
        f.done = true;
      } else if (f.kind == fault::full) {
        say(run_, f.text(), run_.sim_steps, now_ms());
        files_.set_capacity(files_.used_bytes());
        f.done = true;
      } else if (f.kind == fault::fsync) {
        say(run_, f.text(), run_.sim_steps, now_ms());
        files_.fail_syncs(f.index);
        f.done = true;
      }
    }
    for (int32_t i = 0; i < sim_nodes; ++i) {
      auto& n = nodes_[static_cast<size_t>(i)];
      if (!n.up && n.back_at_ms >= 0 && now_ms() >= n.back_at_ms) {
        say(run_, "node n" + std::to_string(i) + " starts again", run_.sim_steps, now_ms());
        start_node(i);
      }
    }
  }

  // Before `a` handles its next message: a crash fault due now?
  bool message_faults(spawned& a) {
    for (auto& f : run_.faults) {
      if (f.done || f.role != a.role || f.index != a.index)
        continue;
      if (f.kind == fault::crash && a.messages + 1 >= f.nth) {
        f.done = true;
        crash(a, f.text());
        return true;
      }
      if (f.kind == fault::cut) {
        auto* sa =
          dynamic_cast<caf::scheduled_actor*>(caf::actor_cast<caf::abstract_actor*>(a.actor));
        auto* next = sa ? sa->mailbox().peek() : nullptr;
        if (next && next->content().match_element<snapshot_atom>(0)) {
          f.done = true;
          crash(a, f.text());
          return true;
        }
      }
    }
    return false;
  }

  void run() {
    manifest_ = sim_manifest();
    start_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                  sched_.clock().current_time.time_since_epoch())
                  .count();
    admin_config ac{manifest_, "sim", "token", "", manifest_.timing, {}};
    for (auto& n : manifest_.nodes)  // each node shows its own token, as on a cluster
      ac.node_tokens[n.name] = "token-" + n.name;
    admin_ = caf::actor_cast<caf::actor>(spawn_admin(sys_, ac));
    nodes_.resize(sim_nodes);
    for (int32_t i = 0; i < sim_nodes; ++i)
      start_node(i);
    // Let every node register before the job starts (the admin starts jobs only then, too).
    while (sched_.try_run_once())
      ++run_.sim_steps;
    auto plan = plan_job(manifest_, run_.spec);
    if (!plan) {
      run_.broken.push_back("setup: cannot plan the simulated job: " + error_text(plan.error()));
      return;
    }
    job_supervisor_config c;
    c.spec = run_.spec;
    for (int32_t i = 0; i < sim_nodes; ++i) {
      c.nodes.push_back(nodes_[static_cast<size_t>(i)].agent);
      c.node_names.push_back("n" + std::to_string(i));
    }
    c.placement = job_placement_of(*plan);
    c.cluster = manifest_;
    c.directory = caf::actor_cast<node_directory_actor>(admin_);
    c.environment = &files_;
    auto sup = spawn_job_supervisor(sys_, c);
    // The client: asks the supervisor to run the job and keeps the answer.
    sys_.spawn([this, sup](caf::event_based_actor* self) {
      self->request(sup, caf::infinite, run_atom::value)
        .then(
          [this](job_result& r) {
            run_.result = std::move(r);
            run_.ended = true;
          },
          [this](caf::error& e) {
            run_.failure = error_text(e);
            run_.ended = true;
          });
    });
    digest d;
    const int64_t max_steps = 400000;
    const int64_t max_ms = 3600 * 1000;  // an hour of simulated time: far past any timeout
    while (!run_.ended && run_.sim_steps < max_steps && now_ms() < max_ms) {
      timed_faults();
      // The ready actors not stalled; pick one.
      std::vector<size_t> ready;
      for (size_t i = 0; i < sched_.jobs.size(); ++i)
        if (!stalled(role_actor(sched_.jobs[i])))
          ready.push_back(i);
      if (ready.empty()) {
        // Nothing to do now: jump to the next timeout (or the end of a stall, a node's return).
        int64_t next = max_ms;
        if (auto t = clock_peek::next(sched_.clock()))
          next = std::min<int64_t>(
            next,
            std::chrono::duration_cast<std::chrono::milliseconds>(t->time_since_epoch()).count()
              - start_ms_);
        for (auto& [id, until] : stalled_until_)
          if (until > now_ms())
            next = std::min(next, until);
        for (auto& n : nodes_)
          if (!n.up && n.back_at_ms > now_ms())
            next = std::min(next, n.back_at_ms);
        for (auto& f : run_.faults)
          if (!f.done && f.kind != fault::crash && f.kind != fault::cut)
            next = std::min(next, now_ms() + 1);  // step-timed faults fire at the next step
        if (next <= now_ms())
          next = now_ms() + 1;
        if (run_.trace && std::getenv("SATRAP_SIM_DEBUG"))
          std::fprintf(stderr, "  idle t=%lld -> %lld (jobs %zu)\n", (long long)now_ms(),
                       (long long)next, sched_.jobs.size());
        advance(std::chrono::milliseconds(next - now_ms()));
        d.add(static_cast<uint64_t>(now_ms()));
        ++run_.sim_steps;  // idle steps count, so step-timed faults still fire
        continue;
      }
      auto pick = ready[rng_.below(ready.size())];
      auto* job = sched_.jobs[pick];
      if (pick != 0)
        std::rotate(sched_.jobs.begin(), sched_.jobs.begin() + static_cast<long>(pick),
                    sched_.jobs.begin() + static_cast<long>(pick) + 1);
      auto* a = role_actor(job);
      if (dump_)
        std::fprintf(dump_, "pick %lld %s %d jobs=%zu t=%lld\n", (long long)run_.sim_steps,
                     a ? a->role.c_str() : "other", a ? a->index : -1, sched_.jobs.size(),
                     (long long)now_ms());
      if (dump_) {
        for (auto* j : sched_.jobs) {
          auto* x = role_actor(j);
          std::fprintf(dump_, "   job %s %d %s\n", x ? x->role.c_str() : "other", x ? x->index : -1,
                       x ? "" : typeid(*j).name());
        }
      }
      if (a) {
        d.add(a->role);
        d.add(static_cast<uint64_t>(a->index));
        if (message_faults(*a)) {
          ++run_.sim_steps;
          continue;
        }
        ++a->messages;
      }
      sched_.run_once();
      ++run_.sim_steps;
      // Each message takes 0..2 ms of simulated time: heartbeats and timeouts interleave.
      auto dt = rng_.below(3);
      if (dt > 0)
        advance(std::chrono::milliseconds(dt));
    }
    run_.sim_ms = now_ms();
    if (!run_.ended)
      run_.broken.push_back("ended: the job neither succeeded nor failed within "
                            + std::to_string(run_.sim_steps) + " steps and "
                            + std::to_string(now_ms()) + " simulated ms (a hang)");
    if (run_.result)
      check_ledgers();
    for (auto& s : run_.injected)
      d.add(s);
    if (run_.result)
      for (auto l : run_.result->step_losses)
        d.add(&l, sizeof l);
    d.add(run_.failure);
    run_.trace_digest = d.h;
    // Stop everything: the supervisor takes its children; then the nodes and the admin. The
    // exits come from a local actor: the admin and the node agents drop anonymous exit messages
    // (actors/peer_guard.hpp), as they would from another process.
    auto stopper = sys_.spawn([] { return caf::behavior{[](int32_t) {}}; });
    auto stop = [&](const auto& handle) {
      auto a = caf::actor_cast<caf::actor>(handle);
      if (a)
        caf::send_as(stopper, a, caf::exit_msg{stopper.address(), caf::exit_reason::user_shutdown});
    };
    stop(sup);
    for (auto& n : nodes_) {
      if (n.up) {
        stop(n.agent);
        stop(n.proc);
      }
    }
    stop(admin_);
    caf::anon_send_exit(stopper, caf::exit_reason::user_shutdown);
    while (sched_.try_run_once()) {}
  }

  // The final shards' statistics (with their audit ledgers) come with the job's result.
  void check_ledgers() {
    auto& shards = run_.result->shards;
    if (shards.size() != static_cast<size_t>(run_.spec.placement.shards)) {
      run_.broken.push_back("exactly_once: the result has statistics of "
                            + std::to_string(shards.size()) + " shards, the job has "
                            + std::to_string(run_.spec.placement.shards));
      return;
    }
    for (auto& s : shards)
      if (s.shard < 0) {
        // A shard lost after training ended: the result stands, its ledger is gone. Counted.
        run_.ledger_unreadable = true;
        return;
      }
    std::map<int32_t, const shard_stats*> stats;
    for (auto& s : shards)
      stats[s.shard] = &s;
    std::map<int64_t, int32_t> covered;
    for (auto& [index, sp] : stats) {
      auto& s = *sp;
      if (s.staleness_violations > 0)
        run_.broken.push_back("staleness: shard " + std::to_string(index) + " counted "
                              + std::to_string(s.staleness_violations) + " violations");
      for (size_t i = 0; i + 1 < s.applied.size(); i += 2) {
        auto batch = s.applied[i], times = s.applied[i + 1];
        if (times != 1)
          run_.broken.push_back("exactly_once: batch " + std::to_string(batch) + " applied "
                                + std::to_string(times) + " times on shard "
                                + std::to_string(index));
        covered[batch] += 1;
      }
    }
    for (int64_t b = 0; b < run_.spec.training.train_batches; ++b)
      if (!covered.count(b)) {
        run_.broken.push_back("exactly_once: batch " + std::to_string(b)
                              + " was applied on no shard");
        break;
      }
    for (auto& [b, n] : covered)
      if (b < 0 || b >= run_.spec.training.train_batches) {
        run_.broken.push_back("exactly_once: a ledger holds batch " + std::to_string(b)
                              + ", not a training batch");
        break;
      }
  }

 private:
  sim_run& run_;
  caf::actor_system& sys_;
  caf::scheduler::test_coordinator& sched_;
  capture_sink& sink_;
  memory_env& files_;
  sim_rng rng_;
  manifest manifest_;
  caf::actor admin_;
  std::vector<sim_node> nodes_;
  std::vector<spawned> actors_;
  std::map<caf::resumable*, size_t> by_job_;
  std::map<caf::actor_id, int64_t> stalled_until_;
  int64_t start_ms_ = 0;
  FILE* dump_ =
    std::getenv("SATRAP_SIM_DUMP") ? std::fopen(std::getenv("SATRAP_SIM_DUMP"), "a") : nullptr;

 public:
  ~simulation() {
    if (dump_)
      std::fclose(dump_);
  }
};

// satrap's types, without the io module: the middleman's threads would interleave with the
// simulation (nothing here goes over a network).
class sim_config : public caf::actor_system_config {
 public:
  sim_config() {
    register_types(*this);
    set("scheduler.policy", caf::atom("testing"));
    set("logger.verbosity", caf::atom("quiet"));
    set("logger.console", caf::atom("none"));
  }
};

std::vector<double> reference_losses(const job_spec& spec) {
  reference_options ref;
  ref.model = spec.model.network;
  ref.embedding = spec.model.embedding;
  ref.dense = spec.model.dense;
  ref.pool = spec.model.pool;
  ref.batch_size = spec.training.batch_size;
  ref.train_batches = spec.training.train_batches;
  ref.test_batches = spec.training.test_batches;
  ref.seed = spec.training.seed;
  return reference_train(synthetic_generator(spec.data.synthetic), ref).batch_losses;
}

// The disk invariant (see the header): what the real code does with a full disk or a failed fsync.
void check_disk(sim_run& run, const memory_env& files, const capture_sink& sink) {
  bool alone = run.faults.size() == 1;
  run.disk_fault_met = files.refused_writes() > 0 || files.failed_syncs() > 0;
  bool failed = run.ended && !run.result;
  auto has = [](const std::string& text, const char* what) {
    return text.find(what) != std::string::npos;
  };
  const char* enospc = std::strerror(ENOSPC);
  const char* eio = std::strerror(EIO);
  for (auto& r : sink.restart_events)
    if (has(r, enospc))
      run.broken.push_back("disk: the job restarted after a full disk (a restart meets it again): "
                           + r);
  if (files.refused_writes() > 0 && alone && !(failed && has(run.failure, enospc)))
    run.broken.push_back(
      "disk: a write met a full disk, yet the job "
      + (failed ? "FAILED with: " + run.failure : std::string("did not fail with it")));
  if (files.failed_syncs() > 0 && alone) {
    // A shard's failed snapshot restarts the job, unless training had ended (then the result
    // stands: job_failure_after_training).
    bool retried = run.result && (run.result->restarts > 0 || sink.failures_after_training > 0);
    bool named = failed && has(run.failure, "checkpoint at step") && has(run.failure, eio);
    if (!retried && !named)
      run.broken.push_back(
        "disk: an fsync failed, yet the job neither restarted and succeeded nor "
        "failed naming the checkpoint: "
        + (failed ? run.failure : std::string("restarts=0")));
  }
}

sim_run run_seed(uint64_t seed, bool trace, const std::string& work) {
  sim_run run;
  run.seed = seed;
  run.trace = trace;
  sim_rng rng{seed};
  memory_env files;  // the run's disk: checkpoints, snapshots and ledgers, in memory
  run.spec = sim_job(rng, work + "/seed-" + std::to_string(seed));
  run.faults = draw_faults(rng);
  draw_disk_fault(seed, run.faults);
  sim_timing(seed, run.spec);
  if (auto err = job_spec_finalize(run.spec)) {
    run.broken.push_back("setup: " + error_text(err));
    return run;
  }
  auto sink = std::make_shared<capture_sink>();
  sink->echo = trace;
  auto logger = std::make_shared<spdlog::logger>("sim", sink);
  logger->set_level(
    trace ? (std::getenv("SATRAP_SIM_DEBUG") ? spdlog::level::debug : spdlog::level::info)
          : spdlog::level::warn);
  spdlog::set_default_logger(logger);
  {
    sim_config cfg;
    caf::actor_system sys{cfg};
    auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
    sched.clock().current_time += std::chrono::hours(1);
    simulation sim(run, sys, sched, *sink, files);
    sim.run();
  }
  if (sink->staleness_violations > 0)
    run.broken.push_back("staleness: " + std::to_string(sink->staleness_violations)
                         + " staleness_violated events (all generations)");
  check_disk(run, files, *sink);
  bool faulted = !run.faults.empty();
  if (run.result && run.result->restarts != sink->restarts)
    run.broken.push_back("result: the supervisor began " + std::to_string(sink->restarts)
                         + " recoveries, the result reports " + std::to_string(run.result->restarts)
                         + " (a recovery raced the end of the job)");
  if (run.ended && !run.result) {
    if (run.failure.empty())
      run.broken.push_back("ended: the job FAILED without a reason");
    else if (!faulted)
      run.broken.push_back("ended: the job FAILED with no fault injected: " + run.failure);
  }
  if (run.result && run.spec.training.staleness == 0 && run.spec.placement.trainers == 1) {
    run.reference_checked = true;
    auto want = reference_losses(run.spec);
    auto& got = run.result->step_losses;
    if (got.size() != want.size()) {
      run.broken.push_back("reference_loss: " + std::to_string(got.size())
                           + " step losses, the reference loop has " + std::to_string(want.size()));
    } else {
      for (size_t i = 0; i < want.size(); ++i)
        if (std::abs(got[i] - want[i]) > 1e-5 * std::max(1.0, std::abs(want[i]))) {
          char buf[160];
          std::snprintf(buf, sizeof buf,
                        "reference_loss: step %zu loss %.9g, the reference loop %.9g", i, got[i],
                        want[i]);
          run.broken.push_back(buf);
          break;
        }
    }
  }
  return run;
}

void print_run(const sim_run& run) {
  auto& s = run.spec;
  std::printf(
    "seed=%llu trainers=%d staleness=%d aggregators=%d loaders=%d checkpoint_every=%lld "
    "checkpoint_every_s=%d faults=%zu\n",
    (unsigned long long)run.seed, s.placement.trainers, s.training.staleness,
    s.placement.aggregators, s.placement.loaders, (long long)s.checkpoint.every_steps,
    s.checkpoint.every_seconds, run.faults.size());
  for (auto& f : run.faults)
    std::printf("  fault: %s\n", f.text().c_str());
  for (auto& i : run.injected)
    std::printf("  injected: %s\n", i.c_str());
  if (run.result)
    std::printf("  outcome: SUCCEEDED restarts=%lld replayed=%lld checkpoints=%lld auc=%.4f\n",
                (long long)run.result->restarts, (long long)run.result->batches_replayed,
                (long long)run.result->checkpoints, run.result->test_auc);
  else if (run.ended)
    std::printf("  outcome: FAILED %s\n", run.failure.c_str());
  else
    std::printf("  outcome: HUNG\n");
  std::printf("  sim_steps=%lld sim_ms=%lld digest=%016llx\n", (long long)run.sim_steps,
              (long long)run.sim_ms, (unsigned long long)run.trace_digest);
  for (auto& b : run.broken)
    std::printf("  BROKEN %s\n", b.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int64_t seeds = -1, first = 1, one = -1;
  bool trace = false;
  std::string work = "/sim";  // a folder of each run's memory_env (nothing is written to disk)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* what) -> int64_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "satrap_sim: %s needs a number\n", what);
        std::exit(2);
      }
      char* end = nullptr;
      auto v = std::strtoll(argv[++i], &end, 10);
      if (*end != '\0' || v < 0) {
        std::fprintf(stderr, "satrap_sim: %s: expected a non-negative integer, got '%s'\n", what,
                     argv[i]);
        std::exit(2);
      }
      return v;
    };
    if (a == "--seeds")
      seeds = value("--seeds");
    else if (a == "--first")
      first = value("--first");
    else if (a == "--seed")
      one = value("--seed");
    else if (a == "--trace")
      trace = true;
    else if (a == "--work" && i + 1 < argc)
      work = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: satrap_sim --seeds N [--first S] | --seed S [--trace] "
                   "[--work DIR]\n(unknown argument '%s')\n",
                   a.c_str());
      return 2;
    }
  }
  if ((seeds < 0) == (one < 0)) {
    std::fprintf(stderr, "usage: satrap_sim --seeds N [--first S] | --seed S [--trace]\n");
    return 2;
  }
  openblas_set_num_threads(1);
  int rc = 0;
  if (one >= 0) {
    auto a = run_seed(static_cast<uint64_t>(one), trace, work);
    print_run(a);
    auto b = run_seed(static_cast<uint64_t>(one), false, work);
    if (a.trace_digest != b.trace_digest) {
      std::printf("  BROKEN replay: a second run gave digest %016llx\n",
                  (unsigned long long)b.trace_digest);
      rc = 1;
    }
    rc = rc || !a.broken.empty();
  } else {
    int64_t failures = 0, steps = 0, injected = 0, restarts = 0, failed = 0, succeeded = 0,
            checkpoints = 0, replayed = 0, reference = 0, unreadable = 0, disk = 0;
    std::string first_failure = "none";
    for (int64_t s = first; s < first + seeds; ++s) {
      auto r = run_seed(static_cast<uint64_t>(s), false, work);
      steps += r.sim_steps;
      injected += static_cast<int64_t>(r.injected.size());
      reference += r.reference_checked;
      unreadable += r.ledger_unreadable;
      disk += r.disk_fault_met;
      if (r.result) {
        ++succeeded;
        restarts += r.result->restarts;
        checkpoints += r.result->checkpoints;
        replayed += r.result->batches_replayed;
      } else if (r.ended) {
        ++failed;
      }
      if (!r.broken.empty()) {
        ++failures;
        if (first_failure == "none")
          first_failure = std::to_string(s);
        print_run(r);
      }
    }
    std::printf(
      "jobs_succeeded=%lld jobs_failed=%lld faults_injected=%lld restarts=%lld "
      "checkpoints=%lld batches_replayed=%lld reference_checked=%lld "
      "ledgers_unreadable=%lld disk_faults_met=%lld\n",
      (long long)succeeded, (long long)failed, (long long)injected, (long long)restarts,
      (long long)checkpoints, (long long)replayed, (long long)reference, (long long)unreadable,
      (long long)disk);
    std::printf("seeds=%lld failures=%lld first_failure=%s sim_steps=%lld\n", (long long)seeds,
                (long long)failures, first_failure.c_str(), (long long)steps);
    rc = failures > 0;
  }
  return rc;
}
