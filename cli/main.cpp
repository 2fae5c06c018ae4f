// The `satrap` command: subcommands of the runtime. `satrap train` runs a whole job embedded
// in this one process; the cluster subcommands come with the cluster runtime.
#include "cli/cache_command.hpp"
#include "cli/certs_command.hpp"
#include "cli/exit_status.hpp"
#include "cli/cluster_commands.hpp"
#include "cli/plan_command.hpp"
#include "cli/gen_criteo_command.hpp"
#include "cli/k8s_command.hpp"
#include "cli/serving_commands.hpp"
#include "cli/train_command.hpp"

#include "runtime/version.hpp"

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>


int main(int argc, char** argv) {
  // A write past RLIMIT_FSIZE then fails with EFBIG, which the job's record names, instead of
  // SIGXFSZ killing the process (a node killed so would be restarted into the same wall).
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"satrap: trains recommendation models whose embedding tables outgrow one machine.\n"
               "Embeddings train asynchronously with bounded staleness on sharded actors, the\n"
               "dense network synchronously on data-parallel trainers (after PERSIA)."};
  app.set_version_flag("--version", satrap::satrap_version);
  app.require_subcommand(1);
  satrap::train_command train;
  train.add_to(app);
  satrap::gen_criteo_command gen_criteo;
  gen_criteo.add_to(app);
  satrap::plan_command plan;
  plan.add_to(app);
  satrap::k8s_command k8s;
  k8s.add_to(app);
  satrap::cluster_commands cluster;
  cluster.add_to(app);
  satrap::certs_command certs;
  certs.add_to(app);
  satrap::export_command export_cmd;
  export_cmd.add_to(app);
  satrap::predict_command predict;
  predict.add_to(app);
  satrap::serve_command serve;
  serve.add_to(app);
  satrap::cache_command cache;
  cache.add_to(app);
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
  if (train.parsed())
    return train.run();
  if (gen_criteo.parsed())
    return gen_criteo.run();
  if (plan.parsed())
    return plan.run();
  if (k8s.parsed())
    return k8s.run();
  if (certs.parsed())
    return certs.run();
  if (export_cmd.parsed())
    return export_cmd.run();
  if (predict.parsed())
    return predict.run();
  if (serve.parsed())
    return serve.run();
  if (cache.parsed())
    return cache.run();
  if (auto status = cluster.run(); status >= 0)
    return status;
  return 0;
}
