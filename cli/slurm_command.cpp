#include "cli/slurm_command.hpp"

#include "cli/exit_status.hpp"
#include "cli/process_record.hpp"
#include "engines/slurm_script.hpp"
#include "runtime/error.hpp"
#include "runtime/text_file.hpp"
#include "spec/job_spec.hpp"
#include "spec/manifest.hpp"

#include <fstream>
#include <iostream>

namespace satrap {

void slurm_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand(
    "slurm",
    "Print a Slurm batch script that runs a node manifest's cluster as one heterogeneous job "
    "(component 0 the head, then one component per node entry, one Slurm node per satrap "
    "node) and submits a job file to it: `satrap slurm --manifest M --job J > run.sh && sbatch "
    "run.sh`. Each node learns its name and its peers' addresses from Slurm's environment; a "
    "task that exits is started again and rejoins.");
  sub_->add_option("--manifest", manifest_file_, "node manifest (YAML)")->required();
  sub_->add_option("--job", job_file_, "job file to submit (default: the default job)");
  sub_->add_option("--satrap", satrap_,
                   "the satrap binary as the compute nodes see it (default: this one)");
  sub_->add_option("--state-dir", state_dir_,
                   "state dir on a file system every node sees (default: .satrap/<cluster> in "
                   "the directory sbatch runs in)");
  sub_->add_option("--time", time_, "the job's time limit (sbatch --time)");
  sub_->add_option("--partition", partition_, "the partition (sbatch --partition)");
  sub_
    ->add_option("--signal-s", signal_s_,
                 "seconds before the time limit at which the job checkpoints (sbatch --signal)")
    ->capture_default_str()
    ->check(CLI::Range(10, 65535));
  sub_->add_option("--max-restarts", max_restarts_, "restarts of one task before it stays down")
    ->capture_default_str()
    ->check(CLI::Range(0, 1000));
  sub_->add_option("-o,--output", output_, "write to FILE instead of stdout");
}

int slurm_command::run() {
  auto fail = [](const caf::error& e) {
    std::cerr << "satrap slurm: " << error_text(e) << "\n";
    return exit_status_of(e);
  };
  auto text = read_text_file(manifest_file_, manifest_file_max_bytes, "manifest");
  if (!text)
    return fail(text.error());
  manifest m;
  if (auto err = manifest_load_text(*text, manifest_file_, m))
    return fail(err);
  slurm_options o;
  o.manifest_yaml = *text;
  o.source = manifest_file_;
  o.satrap = satrap_.empty() ? satrap_executable() : satrap_;
  o.state_dir = state_dir_;
  o.time = time_;
  o.partition = partition_;
  o.signal_s = signal_s_;
  o.max_restarts = max_restarts_;
  if (!job_file_.empty()) {
    auto job = read_text_file(job_file_, job_file_max_bytes, "job file");
    if (!job)
      return fail(job.error());
    auto spec = job_spec_defaults();  // its errors name the file here, not in the batch job
    if (auto err = job_spec_load_text(*job, job_file_, spec))
      return fail(err);
    o.job_yaml = *job;
  }
  auto script = slurm_render(m, o);
  if (!script)
    return fail(script.error());
  if (output_.empty()) {
    std::cout << *script;
    return 0;
  }
  std::ofstream out(output_, std::ios::trunc);
  if (!(out << *script)) {
    std::cerr << "satrap slurm: cannot write " << output_ << "\n";
    return exit_failed;
  }
  return 0;
}

}  // namespace satrap
