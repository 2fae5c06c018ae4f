// satrap slurm: host lists, the addresses and names a process takes from a heterogeneous job's
// environment, and the batch script's components.
#include "engines/slurm_script.hpp"
#include "runtime/error.hpp"
#include "spec/manifest.hpp"

#include <doctest/doctest.h>

using namespace satrap;

namespace {

manifest load(const std::string& yaml) {
  manifest m;
  auto err = manifest_load_text(yaml, "m.yaml", m);
  REQUIRE_MESSAGE(!err, error_text(err));
  return m;
}

const char* cluster = R"(cluster: demo
head: {host: 127.0.0.1, port: 5000, status_port: 5009}
nodes:
  - name: big
    host: 10.0.0.1
    port: 5002
    resources: {cores: 64, memory: 1TB, gpus: 0}
  - name: gpu-{i}
    count: 2
    host: 127.0.0.1
    port: 5010
    resources: {cores: 8, memory: 6GiB, gpus: 2}
)";

// The environment of a task of component `group` on `self`, in a job of three components.
slurm_env task_env(const std::string& step_list, const std::string& self) {
  return {{"SLURM_HET_SIZE", "3"},
          {"SLURM_JOB_NODELIST_HET_GROUP_0", "c0"},
          {"SLURM_JOB_NODELIST_HET_GROUP_1", "m7"},
          {"SLURM_JOB_NODELIST_HET_GROUP_2", "g[08-09]"},
          {"SLURM_JOB_NODELIST", step_list},
          {"SLURMD_NODENAME", self},
          {"SATRAP_SLURM_ADDRESSES", "c0=10.1.0.1 m7=10.1.0.7 g08=10.1.0.8 g09=10.1.0.9"}};
}

}  // namespace

TEST_CASE("slurm: host lists expand as Slurm writes them") {
  auto v = slurm_hostlist_expand("sn[1-3,07],gpu-a,x[9-10]y");
  REQUIRE(v);
  CHECK(*v == std::vector<std::string>{"sn1", "sn2", "sn3", "sn07", "gpu-a", "x9y", "x10y"});
  auto padded = slurm_hostlist_expand("n[098-101]");
  REQUIRE(padded);
  CHECK(*padded == std::vector<std::string>{"n098", "n099", "n100", "n101"});
  for (auto bad : {"", "sn[1-3", "sn1-3]", "sn[3-1]", "sn[a-b]", "sn[]", "a,,b"}) {
    CAPTURE(bad);
    auto r = slurm_hostlist_expand(bad);
    REQUIRE(!r);
    CHECK(error_text(r.error()).find("Slurm host list") != std::string::npos);
  }
}

TEST_CASE("slurm: every process takes the allocation's addresses, a node finds its name") {
  auto m = load(cluster);
  auto env = task_env("g[08-09]", "g09");
  REQUIRE(!slurm_apply_allocation(m, env));
  CHECK(m.head.host == "10.1.0.1");
  CHECK(m.head.port == 5000);
  CHECK(m.nodes[0].host == "10.1.0.7");
  CHECK(m.nodes[1].host == "10.1.0.8");
  CHECK(m.nodes[2].host == "10.1.0.9");
  CHECK(m.nodes[2].port == 5011);  // the manifest's ports stay
  auto name = slurm_node_name(m, env);
  REQUIRE(name);
  CHECK(*name == "gpu-1");
  auto big = slurm_node_name(m, task_env("m7", "m7"));
  REQUIRE(big);
  CHECK(*big == "big");
  // Without NodeAddr the Slurm node names are the addresses.
  auto plain = load(cluster);
  auto no_addresses = task_env("m7", "m7");
  no_addresses.erase("SATRAP_SLURM_ADDRESSES");
  REQUIRE(!slurm_apply_allocation(plain, no_addresses));
  CHECK(plain.nodes[1].host == "g08");
}

TEST_CASE("slurm: an allocation that does not fit the manifest is refused with the reason") {
  auto m = load(cluster);
  auto env = task_env("g[08-09]", "g09");
  env["SLURM_JOB_NODELIST_HET_GROUP_2"] = "g08";
  auto err = slurm_apply_allocation(m, env);
  REQUIRE(err);
  CHECK(error_text(err).find("component 2 has 1 nodes, the manifest's entry 'gpu-{i}' 2")
        != std::string::npos);
  auto missing = task_env("g[08-09]", "g09");
  missing.erase("SLURM_JOB_NODELIST_HET_GROUP_1");
  err = slurm_apply_allocation(m, missing);
  REQUIRE(err);
  CHECK(error_text(err).find("SLURM_JOB_NODELIST_HET_GROUP_1 is not set") != std::string::npos);
  // A task outside the job's node components, or on a node two components share.
  auto name = slurm_node_name(m, task_env("c0", "c0"));
  REQUIRE(!name);
  CHECK(error_text(name.error()).find("node 'c0' is in no node component") != std::string::npos);
  auto shared = task_env("m7", "m7");
  shared["SLURM_JOB_NODELIST_HET_GROUP_2"] = "m7,g08";
  name = slurm_node_name(m, shared);
  REQUIRE(!name);
  CHECK(error_text(name.error()).find("more than one") != std::string::npos);
}

TEST_CASE("slurm: the batch script asks for one component per node entry after the head's") {
  auto m = load(cluster);
  slurm_options o;
  o.satrap = "/opt/satrap it's";
  o.manifest_yaml = cluster;
  o.job_yaml = "checkpoint: {dir: c}\nname: j\nSATRAP_JOB_END\n";  // a line like the heredoc's end
  o.time = "2:00:00";
  auto s = slurm_render(m, o);
  REQUIRE(s);
  CHECK(s->rfind("#!/bin/bash\n", 0) == 0);
  CHECK(s->find("#SBATCH --signal=B:USR1@120\n") != std::string::npos);
  CHECK(s->find("#SBATCH --time=2:00:00\n") != std::string::npos);
  auto head = s->find("#SBATCH --nodes=1 --ntasks-per-node=1 --cpus-per-task=2 --mem=4096M");
  auto big = s->find("#SBATCH --nodes=1 --ntasks-per-node=1 --cpus-per-task=64 --mem=953674M");
  auto gpu = s->find(
    "#SBATCH --nodes=2 --ntasks-per-node=1 --cpus-per-task=8 --mem=6144M --gpus-per-node=2");
  REQUIRE(head != std::string::npos);
  REQUIRE(big != std::string::npos);
  REQUIRE(gpu != std::string::npos);
  CHECK(head < big);
  CHECK(big < gpu);
  // Two hetjob separators, every #SBATCH line before the first command (sbatch stops there).
  CHECK(s->find("#SBATCH hetjob") < big);
  auto first_command = s->find("\nset -u\n");
  CHECK(s->rfind("#SBATCH") < first_command);
  CHECK(s->find("'/opt/satrap it'\\''s'") != std::string::npos);
  CHECK(s->find("\"$SLURM_JOB_NODELIST_HET_GROUP_2\"); do   # gpu") != std::string::npos);
  // The job file's own line SATRAP_JOB_END does not end its heredoc.
  CHECK(s->find("<<'SATRAP_JOB_END_1'") != std::string::npos);
  CHECK(s->find("if [ \"${SLURM_HET_SIZE:-0}\" != 3 ]") != std::string::npos);
  // A job file without a checkpoint folder checkpoints into the state dir.
  o.job_yaml = "name: j2\n";
  auto defaulted = slurm_render(m, o);
  REQUIRE(defaulted);
  CHECK(defaulted->find("dir: .satrap/demo/checkpoints/j2") != std::string::npos);
  auto no_nodes = m;
  no_nodes.nodes[0].resources.cores = 0;
  auto bad = slurm_render(no_nodes, o);
  REQUIRE(!bad);
  CHECK(error_text(bad.error()).find("node 'big': Slurm needs at least one core")
        != std::string::npos);
}
