// `satrap gen-criteo`: writes Criteo-format text files (label, 13 integer counts, 26 hexadecimal
// categories, tab-separated; optionally gzip) from the synthetic teacher, so that the Criteo
// reading path can be tested end to end without the real data set. It prints the oracle AUC of
// the test file (the teacher's probabilities), the figure a model trained on the files aims at.
// Threading: runs on the calling thread.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace satrap {

struct gen_criteo_options {
  std::string out;                 // output folder (created)
  int64_t train_samples = 100000;  // training lines, over `files` files train-<i>.txt[.gz]
  int64_t test_samples = 20000;    // lines of test.txt[.gz]
  int files = 2;                   // training files
  bool gzip = false;               // write .gz files
  uint64_t seed = 42;              // the synthetic data set's seed (ids, teacher, labels)
  uint64_t vocab = 100000;         // distinct ids per category
  double missing = 0.05;           // share of empty fields (counts and categories)
};

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
