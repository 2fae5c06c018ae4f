// The placement planner: which node of a manifest runs each actor of a job.
//
// Embedding shards go where the memory is (estimated bytes per row x rows per shard; with the SSD
// tier, model.embedding.tier ssd: ram_budget in RAM and every row on the node's `disk`), dense
// trainers on GPU nodes (CPU nodes when the cluster has no GPU), loaders and aggregators where
// the cores are; a role's selector ("k=v,k2=v2", from the job's placement section) restricts it
// to nodes with those labels. Each role is placed worst-fit (the node with the most of the
// resource that role needs left), which spreads shards evenly over the big-memory machines.
// A plan that does not fit is refused with what is missing.
// Threading: pure functions.
#pragma once

#include "spec/job_spec.hpp"
#include "spec/manifest.hpp"

#include <caf/error.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace satrap {

enum class actor_role { embedding_shard, gradient_aggregator, data_loader, dense_trainer };

const char* to_string(actor_role role);

// What one actor of a role needs.
// Cores are shares: actors of one node share CAF's scheduler threads, so a shard or a loader
// that mostly waits on memory or I/O claims half a core, a CPU trainer a whole one.
struct actor_demand {
  uint64_t memory_bytes = 0;
  double cores = 0;
  int32_t gpus = 0;
  uint64_t disk_bytes = 0;  // local disk: a shard's cold rows with model.embedding.tier ssd
};

struct placed_actor {
  actor_role role = actor_role::embedding_shard;
  int32_t index = 0;  // within its role
  size_t node = 0;    // index into the manifest's nodes
};

// Estimated network bytes of one global step (every trainer's batch), by flow.
struct step_traffic {
  double ids = 0;          // loaders -> aggregators
  double dense_batch = 0;  // loaders -> trainers
  double lookups = 0;      // aggregators <-> shards: ids out, rows back
  double pooled = 0;       // aggregators <-> trainers: pooled embeddings and their gradients
  double push = 0;         // aggregators -> shards: ids and summed gradients
  double allreduce = 0;    // trainers <-> trainers: ring all-reduce of dense gradients
  double total() const { return ids + dense_batch + lookups + pooled + push + allreduce; }
};

struct placement_plan {
  std::vector<placed_actor> actors;
  std::vector<actor_demand> node_use;  // per manifest node: what the plan uses there
  actor_demand demand[4];              // per role (indexed by actor_role)
  uint64_t embedding_rows = 0;         // rows the job's tables will hold
  double bytes_per_row = 0;            // estimated, index included
  double disk_bytes_per_row = 0;       // with the SSD tier: a cold row on disk (key, space amp.)
  uint64_t embedding_parameters = 0;   // rows x dim
  uint64_t dense_parameters = 0;
  bool trainers_on_gpus = false;
  step_traffic traffic;
};

caf::expected<placement_plan> plan_job(const manifest& m, const job_spec& spec);

// The plan for people: per node its actors, memory, cores, GPUs; then the totals and the traffic.
std::string plan_to_text(const manifest& m, const job_spec& spec, const placement_plan& plan);

}  // namespace satrap
