// job_supervisor: spawns and wires one job's actors, runs it, and reports the result.
//
// Protocol:
//   run()                      -> job_result, once every trainer has trained and evaluated.
//   progress(progress_report)  from the trainers; summed into job_progress for the observer.
// Through the node agents of the placement it spawns shards, then aggregators (given every
// shard), then loaders (given every aggregator), then trainers (given loaders, aggregators, and
// each other as peers). Its children are linked to it: when it ends, they end.
// Threading: an actor. The observer callback runs inside it, one call at a time.
#pragma once

#include "actors/dense_trainer/dense_trainer.hpp"
#include "actors/node_agent/node_agent.hpp"
#include "runtime/atoms.hpp"
#include "runtime/job_spec.hpp"
#include "runtime/payload.hpp"

#include <caf/actor_system.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace satrap {

// Progress of a running job, for a terminal or a status endpoint.
struct job_progress {
  int64_t steps = 0;          // steps done (the slowest trainer)
  int64_t steps_total = 0;
  int64_t samples = 0;        // training samples so far, all trainers
  double samples_per_sec = 0.0;
  double loss = 0.0;          // mean loss since the previous progress
  double running_auc = 0.5;   // mean over trainers of their recent-prediction AUC
};

struct job_result {
  double test_auc = 0.0;
  double oracle_auc = 0.0;            // AUC of the teacher's probabilities on the same test set
  double test_logloss = 0.0;
  int64_t samples = 0;                // training samples
  int64_t test_samples = 0;
  double train_seconds = 0.0;         // from start to the last trainer's report (evaluation incl.)
  double samples_per_sec = 0.0;       // training samples / train_seconds
  std::vector<double> step_losses;    // mean training loss per step (all trainers)
  std::vector<capnp_payload> params;  // DenseParams of each trainer, by rank
  int64_t embedding_rows = 0;         // rows held by the shards at the end
  std::map<std::string, int64_t> data_skipped;  // input lines skipped (data.on_error skip), by reason
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_result& x) {
  return f(caf::meta::type_name("job_result"), x.test_auc, x.oracle_auc, x.test_logloss,
           x.samples, x.test_samples, x.train_seconds, x.samples_per_sec, x.step_losses, x.params,
           x.embedding_rows, x.data_skipped);
}

using job_supervisor_actor = caf::typed_actor<caf::replies_to<run_atom>::with<job_result>,
                                              caf::reacts_to<progress_atom, progress_report>>;

// Where each actor runs: for each role, the index into `nodes` of each of its actors.
struct job_placement {
  std::vector<uint32_t> shards, aggregators, loaders, trainers;
};

struct job_supervisor_config {
  job_spec spec;                                       // finalised (job_spec_finalize)
  std::function<void(const job_progress&)> observer;   // may be empty
  std::vector<node_agent_actor> nodes;                 // empty: one in-process agent
  job_placement placement;                             // empty lists: everything on nodes[0]
  caf::duration spawn_timeout{std::chrono::seconds(120)};  // per spawn request
};

job_supervisor_actor spawn_job_supervisor(caf::actor_system& sys,
                                          const job_supervisor_config& config);

}  // namespace satrap
