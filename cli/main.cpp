// The `satrap` command: subcommands of the runtime. `satrap train` runs a whole job embedded
// in this one process; the cluster subcommands come with the cluster runtime.
#include "cli/cache_command.hpp"
#include "cli/certs_command.hpp"
#include "cli/exit_status.hpp"
#include "cli/cluster_commands.hpp"
#include "cli/plan_command.hpp"
#include "cli/produce_command.hpp"
#include "cli/gen_criteo_command.hpp"
#include "cli/k8s_command.hpp"
#include "cli/serving_commands.hpp"
#include "cli/slurm_command.hpp"
#include "cli/train_command.hpp"

#include "models/dense/blas_threads.hpp"
#include "runtime/version.hpp"

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>

int main(int argc, char** argv) {
  // A write past RLIMIT_FSIZE then fails with EFBIG, which the job's record names, instead of
  // SIGXFSZ killing the process (a node killed so would be restarted into the same wall).
  std::signal(SIGXFSZ, SIG_IGN);
  satrap::blas_threads_quiesce();  // OpenBLAS's idle threads would spin for the first ~0.1 s
  CLI::App app{
    "satrap: trains recommendation models whose embedding tables outgrow one machine.\n"
    "Embeddings train asynchronously with bounded staleness on sharded actors, the\n"
    "dense network synchronously on data-parallel trainers (after PERSIA)."};
  app.set_version_flag("--version", satrap::satrap_version);
  app.require_subcommand(1);
  satrap::train_command train;
  satrap::gen_criteo_command gen_criteo;
  satrap::plan_command plan;
  satrap::k8s_command k8s;
  satrap::slurm_command slurm;
  satrap::cluster_commands cluster;
  satrap::certs_command certs;
  satrap::export_command export_cmd;
  satrap::predict_command predict;
  satrap::serve_command serve;
  satrap::route_command route;
  satrap::cache_command cache;
  satrap::produce_command produce;
  satrap::command* const commands[] = {&train,   &gen_criteo, &plan,       &k8s,     &slurm,
                                       &cluster, &certs,      &export_cmd, &predict, &serve,
                                       &route,   &cache,      &produce};
  for (auto* c : commands)
    c->add_to(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version: CLI11 prints them. Errors: CLI11's message echoes the argument, made
    // printable; its own codes (105, 106, ...) all mean "bad command line".
    if (e.get_exit_code() == 0)
      return app.exit(e);
    std::fprintf(stderr, "%s\nRun with --help for more information.\n",
                 satrap::printable(e.what()).c_str());
    return satrap::exit_bad_input;
  }
  for (auto* c : commands)
    if (c->parsed())
      return c->run();
  return 0;
}
