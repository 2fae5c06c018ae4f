// `satrap gen-criteo`: the command line of models/data/criteo_writer.hpp. It prints the oracle AUC
// of the test file (the teacher's probabilities), the figure a model trained on the files aims at.
// Threading: runs on the calling thread.
#pragma once

#include "models/data/criteo_writer.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace satrap {

using gen_criteo_options = criteo_write_options;

class gen_criteo_command {
 public:
  void add_to(CLI::App& app);
  bool parsed() const { return sub_ && sub_->parsed(); }
  int run();  // exit status

 private:
  CLI::App* sub_ = nullptr;
  gen_criteo_options options_;
};

}  // namespace satrap
