// What every `satrap` command is to main(): it adds its subcommand (flags and help) to the app,
// says whether the command line chose it, and runs it, returning the process's exit status
// (cli/exit_status.hpp). A command group (cluster_commands) answers for all its subcommands.
// Threading: main's thread.
#pragma once

#include <CLI/CLI.hpp>

namespace satrap {

class command {
 public:
  virtual ~command() = default;
  virtual void add_to(CLI::App& app) = 0;
  virtual bool parsed() const { return sub_ && sub_->parsed(); }
  virtual int run() = 0;  // exit status

 protected:
  CLI::App* sub_ = nullptr;  // the subcommand add_to made
};

}  // namespace satrap
