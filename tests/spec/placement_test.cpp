// The placement planner: shards follow memory, trainers GPUs, selectors hold, misfits are refused.
#include "runtime/error.hpp"
#include "spec/placement.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace satrap;

namespace {

manifest load(const std::string& path) {
  manifest m;
  auto err = manifest_load_file(std::string(SATRAP_SOURCE_DIR) + "/" + path, m);
  REQUIRE_MESSAGE(!err, error_text(err));
  return m;
}

job_spec load_job(const std::string& path) {
  auto spec = job_spec_defaults();
  auto err = job_spec_load_file(std::string(SATRAP_SOURCE_DIR) + "/" + path, spec);
  REQUIRE_MESSAGE(!err, error_text(err));
  REQUIRE(!job_spec_finalize(spec));
  return spec;
}

}  // namespace

TEST_CASE("the 100-trillion-parameter job fits the PERSIA cluster, each role where it belongs") {
  auto m = load("ops/manifests/gcp-persia-100t.yaml");
  auto spec = load_job("ops/jobs/persia-100t.yaml");
  auto plan = plan_job(m, spec);
  REQUIRE_MESSAGE(plan, error_text(plan.error()));
  CHECK(static_cast<double>(plan->embedding_parameters) >= 1e14);
  CHECK(plan->trainers_on_gpus);
  CHECK(plan->actors.size() == 240 + 1200 + 1200 + 64);
  for (auto& a : plan->actors) {
    auto& tier = m.nodes[a.node].labels.at("tier");
    switch (a.role) {
      case actor_role::embedding_shard: CHECK(tier == "memory"); break;
      case actor_role::dense_trainer: CHECK(tier == "gpu"); break;
      default: CHECK(tier == "cpu");
    }
  }
  // Every node within its memory; shards spread evenly (8 per memory node).
  for (size_t i = 0; i < m.nodes.size(); ++i)
    CHECK(plan->node_use[i].memory_bytes <= m.nodes[i].resources.memory_bytes);
  auto text = plan_to_text(m, spec, *plan);
  CHECK(text.find("mem-0 .. mem-29") != std::string::npos);
  CHECK(text.find("8 embedding_shard") != std::string::npos);
}

TEST_CASE("a plan that does not fit says what is missing") {
  auto m = load("ops/manifests/gcp-persia-100t.yaml");
  auto spec = load_job("ops/jobs/persia-100t.yaml");
  spec.placement.embedding_rows *= 2;  // 200T parameters: more than the memory nodes hold
  auto plan = plan_job(m, spec);
  REQUIRE(!plan);
  auto e = error_text(plan.error());
  CHECK(e.find("plan does not fit: embedding_shard") != std::string::npos);
  CHECK(e.find("eligible node(s)") != std::string::npos);
  spec = load_job("ops/jobs/persia-100t.yaml");
  spec.placement.trainers = 128;  // 64 GPUs only
  spec.training.train_batches = 128 * 1000;
  plan = plan_job(m, spec);
  REQUIRE(!plan);
  CHECK(error_text(plan.error()).find("dense_trainer 64 of 128") != std::string::npos);
}

TEST_CASE("without GPUs trainers go to CPU nodes - a selector no node matches is refused") {
  auto m = load("ops/manifests/local-3node.yaml");
  auto spec = job_spec_defaults();
  REQUIRE(!job_spec_finalize(spec));
  auto plan = plan_job(m, spec);
  REQUIRE_MESSAGE(plan, error_text(plan.error()));
  CHECK(!plan->trainers_on_gpus);
  spec.placement.shard_selector = "tier=memory";
  plan = plan_job(m, spec);
  REQUIRE(!plan);
  CHECK(error_text(plan.error()).find("no node matches the embedding_shard selector 'tier=memory'")
        != std::string::npos);
}

TEST_CASE("with the SSD tier the 100T job's shards fit 8 machines with local SSD, not 7") {
  auto m = load("ops/manifests/gcp-persia-100t-ssd.yaml");
  auto spec = load_job("ops/jobs/persia-100t-ssd.yaml");
  auto plan = plan_job(m, spec);
  REQUIRE_MESSAGE(plan, error_text(plan.error()));
  // A shard's RAM is its budget (+ 256 MiB for the process); its disk every row of its share.
  CHECK(plan->demand[0].memory_bytes == spec.model.tier.ram_budget + (uint64_t{256} << 20));
  CHECK(plan->demand[0].disk_bytes > uint64_t{1} << 40);  // > 1 TiB per shard
  size_t ssd_nodes = 0;
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    auto& r = m.nodes[i].resources;
    CHECK(plan->node_use[i].memory_bytes <= r.memory_bytes);
    CHECK(plan->node_use[i].disk_bytes <= r.disk_bytes);
    ssd_nodes += m.nodes[i].labels.at("tier") == "ssd";
  }
  CHECK(ssd_nodes == 8);
  for (auto& a : plan->actors)
    if (a.role == actor_role::embedding_shard)
      CHECK(m.nodes[a.node].labels.at("tier") == "ssd");
  auto text = plan_to_text(m, spec, *plan);
  CHECK(text.find("30 embedding_shard") != std::string::npos);
  CHECK(text.find("SSD tier: 16.0 GiB of RAM") != std::string::npos);
  // One machine fewer: the shards' disk does not fit, and the refusal says so.
  m.nodes.erase(std::find_if(m.nodes.begin(), m.nodes.end(),
                             [](const node_spec& n) { return n.name == "ssd-7"; }));
  plan = plan_job(m, spec);
  REQUIRE(!plan);
  CHECK(error_text(plan.error()).find("of disk") != std::string::npos);
  // Without the tier the same machines hold far fewer rows: RAM, not disk, is the bound.
  m = load("ops/manifests/gcp-persia-100t-ssd.yaml");
  spec.model.tier = tier_options{};
  CHECK(!plan_job(m, spec));
}
