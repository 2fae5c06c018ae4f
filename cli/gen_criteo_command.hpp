// `satrap gen-criteo`: the command line of models/data/criteo_writer.hpp. It prints the oracle AUC
// of the test file (the teacher's probabilities), the figure a model trained on the files aims at.
// Threading: runs on the calling thread.
#pragma once

#include "models/data/criteo_writer.hpp"

#include "cli/command.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace satrap {

using gen_criteo_options = criteo_write_options;

class gen_criteo_command final : public command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  gen_criteo_options options_;
};

}  // namespace satrap
