// The env seam (models/env.hpp): the real env and the in-memory one behave the same on the same
// file operations, and the in-memory env's faults give the real disk's error texts.
#include "models/env.hpp"
#include "models/memory_env.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace satrap {

namespace {

// The same workload on any env, under folder `root`.
void check_files(env& e, const std::string& root) {
  REQUIRE(e.create_dirs(root + "/a/b").ok());
  CHECK(e.is_dir(root + "/a"));
  CHECK(e.is_dir(root + "/a/b"));
  CHECK(e.write_file_atomic(root + "/a/one.json", "{\"x\": 1}").ok());
  CHECK_FALSE(e.exists(root + "/a/one.json.tmp"));
  auto text = e.read_file(root + "/a/one.json");
  REQUIRE(text.ok());
  CHECK(text.value() == "{\"x\": 1}");
  CHECK(e.append_file(root + "/a/b/log", "one\n").ok());
  CHECK(e.append_file(root + "/a/b/log", "two\n", true).ok());
  CHECK(e.read_file(root + "/a/b/log").value() == "one\ntwo\n");
  CHECK(e.file_size(root + "/a/b/log").value() == 8);
  auto names = e.list_dir(root + "/a");
  REQUIRE(names.ok());
  CHECK(names.value() == std::vector<std::string>{"b", "one.json"});
  CHECK(e.tree_bytes(root + "/a") == 16);
  // A view keeps the bytes it saw when the file is rewritten.
  auto view = e.open_view(root + "/a/one.json");
  REQUIRE(view.ok());
  CHECK(e.write_file_atomic(root + "/a/one.json", "{}").ok());
  CHECK(view.value()->text() == "{\"x\": 1}");
  CHECK(e.read_file(root + "/a/one.json").value() == "{}");
  CHECK(e.rename(root + "/a/one.json", root + "/a/b/two.json").ok());
  CHECK_FALSE(e.exists(root + "/a/one.json"));
  CHECK(e.remove_file(root + "/a/b/two.json").ok());
  CHECK(e.remove_file(root + "/a/b/two.json").ok());  // missing: no error
  auto missing = e.read_file(root + "/a/none");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().find(std::strerror(ENOENT)) != std::string::npos);
  CHECK_FALSE(e.open_writable(root + "/no/such/folder/f").ok());
  auto removed = e.remove_all(root + "/a");
  REQUIRE(removed.ok());
  CHECK(removed.value() == 8);
  CHECK_FALSE(e.exists(root + "/a"));
}

}  // namespace

TEST_CASE("env: the real env and the in-memory env agree on files") {
  char tmpl[] = "/tmp/satrap_env_test_XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  check_files(default_env(), tmpl);
  std::filesystem::remove_all(tmpl);
  memory_env mem;
  check_files(mem, "/data");
  check_files(mem, "relative");
  CHECK(mem.used_bytes() == 0);
}

TEST_CASE("env: the in-memory clocks move only when told") {
  memory_env mem;
  auto t0 = mem.steady_now();
  auto w0 = mem.system_now();
  CHECK(mem.steady_now() == t0);
  mem.advance(std::chrono::milliseconds(250));
  CHECK(mem.steady_now() - t0 == std::chrono::milliseconds(250));
  CHECK(mem.system_now() - w0 == std::chrono::milliseconds(250));
  auto real0 = default_env().steady_now();
  CHECK(default_env().steady_now() >= real0);
}

TEST_CASE("env: in-memory faults: disk full, failed fsync, torn writes") {
  memory_env mem;
  REQUIRE(mem.create_dirs("/d").ok());
  mem.set_capacity(10);
  auto full = mem.write_file_atomic("/d/f", "0123456789ab");
  REQUIRE_FALSE(full.ok());
  CHECK(full.error().find(std::strerror(ENOSPC)) != std::string::npos);
  CHECK_FALSE(mem.exists("/d/f"));
  CHECK_FALSE(mem.exists("/d/f.tmp"));  // the partial temporary file is removed
  mem.set_capacity(UINT64_MAX);

  mem.fail_syncs(1);
  auto unsynced = mem.write_file_atomic("/d/f", "abc");
  REQUIRE_FALSE(unsynced.ok());
  CHECK(unsynced.error().find(std::strerror(EIO)) != std::string::npos);
  CHECK(mem.write_file_atomic("/d/f", "abc").ok());

  // A power loss keeps what was synced: the synced file whole, the unsynced tail cut, a file
  // never synced gone.
  CHECK(mem.append_file("/d/log", "kept", true).ok());
  CHECK(mem.append_file("/d/log", "lost").ok());
  CHECK(mem.append_file("/d/never", "lost").ok());
  mem.crash();
  CHECK(mem.read_file("/d/f").value() == "abc");
  CHECK(mem.read_file("/d/log").value() == "kept");
  CHECK_FALSE(mem.exists("/d/never"));
}

}  // namespace satrap
