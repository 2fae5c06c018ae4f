// doctest's main, shared by every test binary.
//
// CTest runs each test case alone (doctest_discover_tests: --test-case=<name>), escaping a comma
// in the name as "\,". doctest 2.4.9 splits filters at every comma and knows no escape, so such a
// case matched nothing and "passed" without running. Here the escaped comma becomes the one-
// character wildcard '?', and a run whose --test-case filter selected no test case fails.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

int cases_run = 0;

struct run_counter : doctest::IReporter {
  explicit run_counter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { ++cases_run; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("run_counter", 1, run_counter);

bool is_case_filter(const std::string& a) {
  for (const char* p : {"--test-case=", "-tc=", "--dt-test-case=", "--dt-tc="})
    if (a.rfind(p, 0) == 0)
      return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  bool filtered = false;
  for (auto& a : args) {
    if (!is_case_filter(a))
      continue;
    filtered = true;
    for (size_t i = a.find("\\,"); i != std::string::npos; i = a.find("\\,", i))
      a.replace(i, 2, "?");
  }
  std::vector<char*> ptrs;
  for (auto& a : args)
    ptrs.push_back(a.data());
  doctest::Context context(static_cast<int>(ptrs.size()), ptrs.data());
  int rc = context.run();
  if (context.shouldExit())
    return rc;
  if (rc == 0 && filtered && cases_run == 0) {
    std::fprintf(stderr, "test_main: the --test-case filter selected no test case\n");
    return 1;
  }
  return rc;
}
