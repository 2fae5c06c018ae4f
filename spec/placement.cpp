#include "spec/placement.hpp"

#include "models/dense/model_zoo.hpp"
#include "models/embedding/row_layout.hpp"
#include "runtime/error.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace satrap {

const char* to_string(actor_role role) {
  switch (role) {
    case actor_role::embedding_shard: return "embedding_shard";
    case actor_role::gradient_aggregator: return "gradient_aggregator";
    case actor_role::data_loader: return "data_loader";
    case actor_role::dense_trainer: return "dense_trainer";
  }
  return "?";
}

namespace {

// The store keeps rows in slabs with a compact index; its benchmark bounds the overhead at 1.25x
// the payload, which is what the planner assumes.
constexpr double index_overhead = 1.25;
// Room left on a node for the process itself, the OS and the network buffers.
constexpr double memory_headroom = 0.9;
// The SSD tier's cold store (RocksDB, no compression): a row is its bytes and an 8-byte key, and
// an LSM tree's leveled compaction keeps up to ~1.1x the live data, plus its indexes and bloom
// filters: the planner assumes 1.25x, and fills a node's disk to 90% at most.
constexpr double disk_overhead = 1.25;
constexpr double disk_headroom = 0.9;

bool matches(const node_spec& node, const std::string& selector) {
  std::stringstream ss(selector);
  std::string term;
  while (std::getline(ss, term, ',')) {
    if (term.empty())
      continue;
    auto eq = term.find('=');
    auto key = term.substr(0, eq);
    auto it = node.labels.find(key);
    if (it == node.labels.end())
      return false;
    if (eq != std::string::npos && it->second != term.substr(eq + 1))
      return false;
  }
  return true;
}

struct planner {
  const manifest& m;
  const job_spec& spec;
  placement_plan plan;

  bool fits(size_t node, const actor_demand& d) const {
    auto& r = m.nodes[node].resources;
    auto& u = plan.node_use[node];
    return u.cores + d.cores <= r.cores && u.gpus + d.gpus <= r.gpus
           && static_cast<double>(u.memory_bytes + d.memory_bytes)
                <= static_cast<double>(r.memory_bytes) * memory_headroom
           && (d.disk_bytes == 0
               || static_cast<double>(u.disk_bytes + d.disk_bytes)
                    <= static_cast<double>(r.disk_bytes) * disk_headroom);
  }

  // What is left of the resource a role cares about most.
  double room(size_t node, actor_role role) const {
    auto& r = m.nodes[node].resources;
    auto& u = plan.node_use[node];
    switch (role) {
      case actor_role::embedding_shard:  // with the SSD tier the disk is what shards fill
        if (plan.demand[0].disk_bytes > 0)
          return static_cast<double>(r.disk_bytes) - static_cast<double>(u.disk_bytes);
        return static_cast<double>(r.memory_bytes) - static_cast<double>(u.memory_bytes);
      case actor_role::dense_trainer:
        if (plan.trainers_on_gpus)
          return r.gpus - u.gpus;
        [[fallthrough]];
      default: return r.cores - u.cores;
    }
  }

  caf::error place(actor_role role, int32_t count, const std::string& selector) {
    auto d = plan.demand[static_cast<int>(role)];
    std::vector<size_t> eligible;
    for (size_t i = 0; i < m.nodes.size(); ++i)
      if (matches(m.nodes[i], selector)
          && (role != actor_role::dense_trainer || !plan.trainers_on_gpus
              || m.nodes[i].resources.gpus > 0))
        eligible.push_back(i);
    if (eligible.empty())
      return make_error(errc::invalid_config, std::string("plan does not fit: no node matches the ")
                                                + to_string(role) + " selector '" + selector + "'");
    for (int32_t k = 0; k < count; ++k) {
      size_t best = eligible[0];
      bool found = false;
      for (auto i : eligible)
        if (fits(i, d) && (!found || room(i, role) > room(best, role))) {
          best = i;
          found = true;
        }
      if (!found)
        return missing(role, k, count, d, eligible);
      auto& u = plan.node_use[best];
      u.memory_bytes += d.memory_bytes;
      u.disk_bytes += d.disk_bytes;
      u.cores += d.cores;
      u.gpus += d.gpus;
      plan.actors.push_back({role, k, best});
    }
    return caf::none;
  }

  caf::error missing(actor_role role, int32_t placed, int32_t count, const actor_demand& d,
                     const std::vector<size_t>& eligible) const {
    double mem = 0;
    double cores = 0;
    double disk = 0;
    int64_t gpus = 0;
    for (auto i : eligible) {
      auto& r = m.nodes[i].resources;
      auto& u = plan.node_use[i];
      disk += std::max(
        0.0, static_cast<double>(r.disk_bytes) * disk_headroom - static_cast<double>(u.disk_bytes));
      mem += std::max(0.0, static_cast<double>(r.memory_bytes) * memory_headroom
                             - static_cast<double>(u.memory_bytes));
      cores += r.cores - u.cores;
      gpus += r.gpus - u.gpus;
    }
    std::ostringstream os;
    os << "plan does not fit: " << to_string(role) << " " << placed << " of " << count << " needs "
       << format_bytes(static_cast<double>(d.memory_bytes)) << ", " << d.cores << " core(s)"
       << (d.gpus ? ", " + std::to_string(d.gpus) + " GPU(s)" : std::string{})
       << (d.disk_bytes ? ", " + format_bytes(static_cast<double>(d.disk_bytes)) + " of disk"
                        : std::string{})
       << " on one node, and no eligible node has that left; the " << eligible.size()
       << " eligible node(s) have " << format_bytes(mem) << ", " << cores << " core(s)"
       << (d.disk_bytes ? ", " + format_bytes(disk) + " of disk" : std::string{}) << " and " << gpus
       << " GPU(s) left in all; the remaining " << (count - placed) << " need "
       << format_bytes(static_cast<double>(d.memory_bytes) * (count - placed))
       << (d.disk_bytes ? ", " + format_bytes(static_cast<double>(d.disk_bytes) * (count - placed))
                            + " of disk"
                        : std::string{})
       << " and " << d.cores * (count - placed) << " core(s)";
    return make_error(errc::invalid_config, os.str());
  }
};

void estimate_demand(const manifest& m, const job_spec& spec, placement_plan& p) {
  auto& e = spec.model.embedding;
  auto& pl = spec.placement;
  auto& t = spec.training;
  auto& net = spec.model.network;
  p.embedding_rows = pl.embedding_rows > 0 ? pl.embedding_rows
                                           : static_cast<uint64_t>(spec.data.synthetic.slots)
                                               * spec.data.synthetic.vocab;
  p.bytes_per_row = static_cast<double>(row_layout::of(e).stride) * index_overhead;
  p.embedding_parameters = p.embedding_rows * static_cast<uint64_t>(e.dim);
  p.dense_parameters = dense_model_param_count(net);
  p.trainers_on_gpus =
    std::any_of(m.nodes.begin(), m.nodes.end(), [](auto& n) { return n.resources.gpus > 0; });
  double rows_per_shard = static_cast<double>(p.embedding_rows) / pl.shards;
  auto in_flight = static_cast<double>(t.staleness + 1);
  double batch_ids =
    static_cast<double>(t.batch_size) * net.slots * job_synthetic_ids_per_slot(spec.data);
  double pooled = static_cast<double>(t.batch_size) * net.slots * net.dim * 4.0;
  constexpr double mib = 1024.0 * 1024.0;
  // A count-min admission sketch is allocated whole in every shard.
  double sketch = e.admission == admission_kind::count_min
                    ? static_cast<double>(e.sketch_width) * e.sketch_depth * 2.0
                    : 0.0;
  p.demand[0] = {static_cast<uint64_t>(rows_per_shard * p.bytes_per_row + sketch + 256 * mib), 0.5,
                 0};
  if (spec.model.tier.kind == tier_kind::ssd) {  // RAM: the budget; every row on local disk
    p.disk_bytes_per_row = (static_cast<double>(row_layout::of(e).stride) + 8) * disk_overhead;
    p.demand[0].memory_bytes =
      static_cast<uint64_t>(static_cast<double>(spec.model.tier.ram_budget) + sketch + 256 * mib);
    p.demand[0].disk_bytes = static_cast<uint64_t>(rows_per_shard * p.disk_bytes_per_row);
  }
  // Aggregators keep each in-flight batch's de-dup map and pooled rows for every trainer they serve.
  double per_batch = batch_ids * (8 + 4 + 8) + pooled * 2;
  double batches = in_flight * pl.trainers / pl.aggregators + 1;
  p.demand[1] = {static_cast<uint64_t>(per_batch * batches + 256 * mib), 0.5, 0};
  p.demand[2] = {static_cast<uint64_t>(512 * mib), 0.5, 0};
  // Trainers: params, grads, two optimizer moments, activations of a few batches.
  double dense = static_cast<double>(p.dense_parameters) * 4 * 4;
  p.demand[3] = {static_cast<uint64_t>(dense + in_flight * pooled * 4 + 1024 * mib), 1.0,
                 p.trainers_on_gpus ? 1 : 0};
  // Traffic of one global step: every trainer's batch through every flow.
  auto T = static_cast<double>(pl.trainers);
  double unique = batch_ids;  // upper bound: Zipf data de-duplicates well below it
  p.traffic.ids = T * (batch_ids * 8 + static_cast<double>(t.batch_size) * net.slots * 4);
  p.traffic.dense_batch = T * t.batch_size * (net.dense_features * 4.0 + 8);
  p.traffic.lookups = T * unique * (8 + e.dim * 4.0);
  p.traffic.pooled = T * pooled * 2;
  p.traffic.push = T * unique * (8 + e.dim * 4.0);
  p.traffic.allreduce =
    T > 1 ? T * 2 * (T - 1) / T * static_cast<double>(p.dense_parameters) * 4 : 0;
}

}  // namespace

caf::expected<placement_plan> plan_job(const manifest& m, const job_spec& spec) {
  planner pl{m, spec, {}};
  pl.plan.node_use.assign(m.nodes.size(), {});
  estimate_demand(m, spec, pl.plan);
  auto& p = spec.placement;
  // Biggest and scarcest first: shards by memory, trainers by GPU, then the core-bound roles.
  if (auto e = pl.place(actor_role::embedding_shard, p.shards, p.shard_selector))
    return e;
  if (auto e = pl.place(actor_role::dense_trainer, p.trainers, p.trainer_selector))
    return e;
  if (auto e = pl.place(actor_role::gradient_aggregator, p.aggregators, p.aggregator_selector))
    return e;
  if (auto e = pl.place(actor_role::data_loader, p.loaders, p.loader_selector))
    return e;
  return std::move(pl.plan);
}

std::string plan_to_text(const manifest& m, const job_spec& spec, const placement_plan& plan) {
  std::ostringstream os;
  char line[512];
  // Per node: the count of each role (a 138-node plan must stay readable).
  std::vector<std::map<actor_role, std::pair<int32_t, int32_t>>> per_node(m.nodes.size());
  for (auto& a : plan.actors) {
    auto& slot = per_node[a.node][a.role];
    if (slot.first == 0)
      slot.second = a.index;
    ++slot.first;
  }
  std::snprintf(line, sizeof line, "plan for job '%s' on cluster '%s' (%zu nodes)\n",
                spec.name.c_str(), m.cluster.c_str(), m.nodes.size());
  os << line;
  std::snprintf(line, sizeof line, "%-24s %12s %12s %10s %6s  %s\n", "node", "memory", "of",
                "cores", "gpus", "actors");
  os << line;
  // Consecutive nodes with the same row print once, as "first .. last (xN, each)".
  size_t idle = 0;
  std::string prev_row, prev_first, prev_last;
  size_t run = 0;
  auto flush = [&] {
    if (run == 0)
      return;
    auto name = run == 1 ? prev_first : prev_first + " .. " + prev_last;
    auto tail = run == 1 ? std::string{} : "  (x" + std::to_string(run) + ", each)";
    std::snprintf(line, sizeof line, "%-24s %s%s\n", name.c_str(), prev_row.c_str(), tail.c_str());
    os << line;
    run = 0;
  };
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    if (per_node[i].empty()) {
      ++idle;
      continue;
    }
    std::string actors;
    for (auto& [role, c] : per_node[i])
      actors += (actors.empty() ? "" : ", ") + std::to_string(c.first) + " " + to_string(role);
    auto& u = plan.node_use[i];
    auto& r = m.nodes[i].resources;
    char row[400];
    std::snprintf(row, sizeof row, "%12s %12s %5.1f/%-4d %2d/%-3d  %s",
                  format_bytes(static_cast<double>(u.memory_bytes)).c_str(),
                  format_bytes(static_cast<double>(r.memory_bytes)).c_str(), u.cores, r.cores,
                  u.gpus, r.gpus, actors.c_str());
    if (run > 0 && row == prev_row) {
      prev_last = m.nodes[i].name;
      ++run;
      continue;
    }
    flush();
    prev_row = row;
    prev_first = prev_last = m.nodes[i].name;
    run = 1;
  }
  flush();
  if (idle)
    os << "(" << idle << " node(s) get no actor)\n";
  auto params = static_cast<double>(plan.embedding_parameters + plan.dense_parameters);
  std::snprintf(line, sizeof line,
                "parameters: %.3g (embedding %.3g in %.3g rows of dim %d at %.0f bytes/row, "
                "dense %.3g)\n",
                params, static_cast<double>(plan.embedding_parameters),
                static_cast<double>(plan.embedding_rows), spec.model.embedding.dim,
                plan.bytes_per_row, static_cast<double>(plan.dense_parameters));
  os << line;
  uint64_t mem = 0;
  for (auto& u : plan.node_use)
    mem += u.memory_bytes;
  os << "memory planned: " << format_bytes(static_cast<double>(mem)) << "; dense trainers on "
     << (plan.trainers_on_gpus ? "GPUs" : "CPU cores") << "\n";
  if (plan.demand[0].disk_bytes > 0) {  // the SSD tier: shards' RAM budgets and their disks
    uint64_t disk = 0;
    std::map<size_t, int> shard_nodes;
    for (auto& u : plan.node_use)
      disk += u.disk_bytes;
    for (auto& a : plan.actors)
      if (a.role == actor_role::embedding_shard)
        ++shard_nodes[a.node];
    std::snprintf(line, sizeof line,
                  "SSD tier: %s of RAM and %s of local disk per shard (%.0f bytes/row on disk); "
                  "disk planned: %s; %zu node(s) hold shards\n",
                  format_bytes(static_cast<double>(spec.model.tier.ram_budget)).c_str(),
                  format_bytes(static_cast<double>(plan.demand[0].disk_bytes)).c_str(),
                  plan.disk_bytes_per_row, format_bytes(static_cast<double>(disk)).c_str(),
                  shard_nodes.size());
    os << line;
  }
  auto& t = plan.traffic;
  std::snprintf(line, sizeof line,
                "network per step (%d trainers x batch %d): %s = ids %s, dense %s, lookups %s, "
                "pooled %s, gradient push %s, all-reduce %s\n",
                spec.placement.trainers, spec.training.batch_size, format_bytes(t.total()).c_str(),
                format_bytes(t.ids).c_str(), format_bytes(t.dense_batch).c_str(),
                format_bytes(t.lookups).c_str(), format_bytes(t.pooled).c_str(),
                format_bytes(t.push).c_str(), format_bytes(t.allreduce).c_str());
  os << line;
  return os.str();
}

}  // namespace satrap
