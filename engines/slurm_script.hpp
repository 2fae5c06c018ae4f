// slurm_script: a node manifest's cluster as one Slurm batch job (`satrap slurm`), and what a
// satrap process started inside that job learns from Slurm's environment.
//
// The script (bash, for `sbatch`) asks for a heterogeneous job: component 0 the head (one Slurm
// node), component k the manifest's k-th node entry (`count` Slurm nodes, one task each, with
// the entry's cores as --cpus-per-task, its memory as --mem and its GPUs as --gpus-per-node).
// Inside the allocation it writes the manifest and the job file into the state dir (on the
// shared file system: the submit dir's .satrap/<cluster>, or --state-dir), makes the admin token
// and the certificates there when missing, and starts, as one job step each, the head on
// component 0 and one `satrap node` per Slurm node of every other component. Each step is kept
// running: when its process exits it is started again (backoff 1 s doubled to 8 s, at most
// `max_restarts` times), so a killed node task comes back and rejoins while satrap's own
// recovery re-places the job on the nodes that are alive. Then it submits the job file with
// `satrap submit --follow`; the batch job's exit status is submit's (0 only when the job
// SUCCEEDED). `--signal=B:USR1@S` makes Slurm signal the script S seconds before the time limit:
// it then asks the head for a checkpoint of the running job (`satrap checkpoint`; a job file
// without checkpoint.dir checkpoints into the state dir's checkpoints/<job name>). At the end, and
// on `scancel` (SIGTERM), it stops every step with SIGTERM and waits for them.
//
// Every satrap process of the job runs with SATRAP_SLURM=1: it then takes the addresses from the
// allocation (slurm_apply_allocation): the head listens on component 0's node, node i of entry k
// on the i-th node of component k+1 (SLURM_JOB_NODELIST_HET_GROUP_<k+1>), each at its manifest
// port; a Slurm node's address is its NodeAddr, which the script reads with `scontrol` into
// SATRAP_SLURM_ADDRESSES ("name=addr ..."), else its name. A `satrap node` started without
// --name finds its own (slurm_node_name): its component is the one whose node list holds
// SLURMD_NODENAME (components of a heterogeneous job get nodes of their own), its index the
// place of SLURMD_NODENAME in that list.
// Threading: pure functions.
#pragma once

#include "spec/manifest.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <map>
#include <string>
#include <vector>

namespace satrap {

struct slurm_options {
  std::string satrap = "satrap";  // the satrap binary as the compute nodes see it
  std::string manifest_yaml;      // the manifest file's text, embedded in the script
  std::string job_yaml;           // the job file's text ("" = the default job, `{}`)
  std::string source;             // the manifest file, named in the header comment
  std::string state_dir;          // "" = .satrap/<cluster> in the submit directory
  std::string time;               // --time ("" = the partition's default)
  std::string partition;          // --partition ("" = the default partition)
  int signal_s = 120;             // USR1 this long before the time limit: a checkpoint
  int head_cpus = 2;              // the head's component
  uint64_t head_memory_bytes = uint64_t{4} << 30;
  int max_restarts = 5;   // of one step, before the script leaves its node down
  int node_wait_s = 600;  // how long a node keeps trying to reach the head
  int head_wait_s = 300;  // how long the script waits for the head to answer
  // A job without checkpoint.dir checkpoints into <state dir>/checkpoints/<name> (every this
  // many seconds unless it has a schedule), so that a lost node, a restarted head and the
  // signal before the time limit resume from there.
  int checkpoint_every_s = 600;
};

// The batch script, or an error naming what cannot run under Slurm.
caf::expected<std::string> slurm_render(const manifest& m, const slurm_options& options);

// Slurm's environment as a satrap process sees it (only the keys it reads matter).
using slurm_env = std::map<std::string, std::string>;

// A Slurm host list ("sn[1-3,07],gpu-a") as names, in order; an error names the list.
caf::expected<std::vector<std::string>> slurm_hostlist_expand(const std::string& list);

// `m` with the addresses of the allocation described by `env` (above): the head's host and
// every node's host; the ports stay. An error when the allocation does not match the manifest
// (components or nodes missing).
caf::error slurm_apply_allocation(manifest& m, const slurm_env& env);

// The manifest name of the node whose task runs with `env` (above).
caf::expected<std::string> slurm_node_name(const manifest& m, const slurm_env& env);

}  // namespace satrap
