// runtime/log: a log file rotates by size, keeps a bounded number of files, and takes this
// process's stdout and stderr along to each new file (README "Security": logs rotate).
#include "runtime/log.hpp"

#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace satrap;
namespace fs = std::filesystem;

TEST_CASE("log: a tiny size limit and many lines give rotated files of bounded total size") {
  auto dir = fs::temp_directory_path() / ("satrap-log-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto file = (dir / "head.log").string();
  // stdout and stderr follow the log file: keep the test runner's.
  std::fflush(stdout);
  std::fflush(stderr);
  int saved_out = ::dup(STDOUT_FILENO), saved_err = ::dup(STDERR_FILENO);
  constexpr uint64_t max_bytes = 8192;
  constexpr size_t files = 3;
  auto why = log_setup("info", file, {max_bytes, files});
  uint64_t written = 0;
  for (int i = 0; i < 2000; ++i) {
    spdlog::info("log_test_line n={} padding={}", i, std::string(40, 'x'));
    written += 100;
  }
  spdlog::debug("log_test_hidden");  // under the level: not written
  std::fprintf(stderr, "log_test_stderr after rotations\n");
  std::fflush(stderr);
  ::dup2(saved_out, STDOUT_FILENO);
  ::dup2(saved_err, STDERR_FILENO);
  ::close(saved_out);
  ::close(saved_err);
  log_setup("warn");  // back to stderr for the other tests
  REQUIRE_MESSAGE(why.empty(), why);

  uint64_t total = 0;
  size_t count = 0;
  std::string all;
  for (auto& e : fs::directory_iterator(dir)) {
    ++count;
    total += fs::file_size(e.path());
    CHECK_MESSAGE(fs::file_size(e.path()) <= max_bytes + 200, e.path().string());
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    all += ss.str();
  }
  CHECK(count == files);  // head.log, head.1.log, head.2.log
  CHECK(fs::exists(dir / "head.1.log"));
  CHECK(fs::exists(dir / "head.2.log"));
  CHECK(!fs::exists(dir / "head.3.log"));
  CHECK(total <= files * (max_bytes + 200));
  CHECK(written > 4 * total);  // most lines were rotated away
  // The newest line is in the current file, and so is what went to stderr after the rotations.
  std::ifstream cur(file);
  std::stringstream ss;
  ss << cur.rdbuf();
  CHECK(ss.str().find("log_test_line n=1999 ") != std::string::npos);
  CHECK(ss.str().find("log_test_stderr after rotations") != std::string::npos);
  CHECK(all.find("log_test_hidden") == std::string::npos);
  CHECK(all.find("log_test_line n=0 ") == std::string::npos);  // rotated away
  fs::remove_all(dir);
}

TEST_CASE("log: an unknown level or a bad rotation is refused with why") {
  CHECK(log_setup("loud", "/tmp/never.log").find("loud") != std::string::npos);
  CHECK(!log_setup("info", "/tmp/never.log", {100, 3}).empty());
  CHECK(!log_setup("info", "/tmp/never.log", {8192, 0}).empty());
  CHECK(!std::filesystem::exists("/tmp/never.log"));
}
