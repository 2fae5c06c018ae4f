#include "cli/gen_criteo_command.hpp"

#include "cli/exit_status.hpp"

#include <cstdio>
#include <iostream>

namespace satrap {

namespace {

// A count of lines: a whole number in [0, 10^12] (CLI11's NonNegativeNumber names a range up to
// DBL_MAX in its message).
CLI::Validator line_count() {
  return CLI::Validator(
    [](std::string& text) -> std::string {
      int64_t v = 0;
      if (!CLI::detail::lexical_cast(text, v) || v < 0 || v > 1'000'000'000'000)
        return "expected a whole number in [0, 10^12], got '" + text + "'";
      return "";
    },
    "COUNT");
}

}  // namespace

void gen_criteo_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand("gen-criteo",
                            "Write Criteo-format files (train-<i>.txt, test.txt) "
                            "from the synthetic teacher");
  auto& o = options_;
  sub_->add_option("--out", o.out, "output folder")->required();
  sub_->add_option("--train-samples", o.train_samples, "training lines in all")
    ->capture_default_str()
    ->check(line_count());
  sub_->add_option("--test-samples", o.test_samples, "test lines")
    ->capture_default_str()
    ->check(line_count());
  sub_->add_option("--files", o.files, "training files")
    ->capture_default_str()
    ->check(CLI::Range(1, 1 << 16));
  sub_->add_flag("--gzip", o.gzip, "write gzip files (.gz)");
  sub_->add_option("--seed", o.seed, "data and teacher seed")->capture_default_str();
  sub_->add_option("--vocab", o.vocab, "distinct ids per category")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  sub_->add_option("--missing", o.missing, "share of empty fields")
    ->capture_default_str()
    ->check(CLI::Range(0.0, 1.0));
}

int gen_criteo_command::run() {
  auto& o = options_;
  auto written = write_criteo_files(o);
  if (!written) {
    std::cerr << "satrap gen-criteo: " << written.error() << "\n";
    return written.bad_input() ? exit_bad_input : exit_failed;
  }
  std::printf(
    "wrote %lld training lines in %d files and %lld test lines to %s; test oracle auc %.4f\n",
    static_cast<long long>(o.train_samples), o.files, static_cast<long long>(o.test_samples),
    o.out.c_str(), written->test_oracle_auc);
  return 0;
}

}  // namespace satrap
