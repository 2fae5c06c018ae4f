// The data cache's size cap: least recently used data sets go first; never the one in use, never
// a folder still being converted (no manifest yet).
#include "models/data/dataset_cache.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace satrap;
namespace fs = std::filesystem;

namespace {

void make_set(const fs::path& dir, size_t bytes, int age_s, bool with_manifest = true) {
  fs::create_directories(dir);
  std::ofstream(dir / "f0-c0.chunk") << std::string(bytes, 'x');
  if (!with_manifest)
    return;
  std::ofstream(dir / "manifest.bin") << "m";
  fs::last_write_time(dir / "manifest.bin",
                      fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
}

}  // namespace

TEST_CASE("dataset_cache_trim deletes least recently used data sets down to the cap") {
  auto root = fs::temp_directory_path() / ("satrap-cache-trim-" + std::to_string(::getpid()));
  fs::remove_all(root);
  make_set(root / "old", 10000, 300);
  make_set(root / "middle", 10000, 200);
  make_set(root / "in-use", 10000, 400);  // the oldest, but the job's own
  make_set(root / "converting", 10000, 0, false);
  make_set(root / "new", 10000, 100);
  // 5 sets of ~10 KB; a cap of 35 KB: the two least recently used that may go, go.
  CHECK(dataset_cache_trim(root.string(), 35000, (root / "in-use").string()) == 2);
  CHECK_FALSE(fs::exists(root / "old"));
  CHECK_FALSE(fs::exists(root / "middle"));
  CHECK(fs::exists(root / "in-use"));
  CHECK(fs::exists(root / "converting"));
  CHECK(fs::exists(root / "new"));
  // Under the cap: nothing more goes.
  CHECK(dataset_cache_trim(root.string(), 35000, (root / "in-use").string()) == 0);
  fs::remove_all(root);
}
