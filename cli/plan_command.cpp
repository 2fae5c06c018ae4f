#include "cli/plan_command.hpp"

#include "cli/exit_status.hpp"

#include "runtime/error.hpp"
#include "spec/manifest.hpp"
#include "spec/placement.hpp"

#include <iostream>

namespace satrap {

void plan_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand("plan",
                            "Print where a job's actors would run on a cluster (per node: "
                            "actors, memory, cores, GPUs) and the estimated network bytes "
                            "per step, without running it. A plan that does not fit is "
                            "refused with what is missing.");
  sub_->add_option("--manifest", manifest_file_, "node manifest (YAML)")
    ->required()
    ->check(CLI::ExistingFile);
  job_.add_to(*sub_, false);
}

int plan_command::run() {
  manifest m;
  if (auto err = manifest_load_file(manifest_file_, m)) {
    std::cerr << "satrap plan: " << error_text(err) << "\n";
    return 2;
  }
  auto spec = job_.resolve();
  if (!spec) {
    std::cerr << "satrap plan: " << error_text(spec.error()) << "\n";
    return 2;
  }
  auto plan = plan_job(m, *spec);
  if (!plan) {
    std::cerr << "satrap plan: " << error_text(plan.error()) << "\n";
    return exit_status_of(plan.error());  // a job that does not fit is refused (2)
  }
  std::cout << plan_to_text(m, *spec, *plan);
  return 0;
}

}  // namespace satrap
