// The data cache's locks (models/data/cache_lock.hpp): a data set a reader holds is not deleted
// (by the size cap or `satrap cache clean`), a free one is, and a reader that waited while its
// folder was deleted learns that it is gone. flock locks of two open files conflict within one
// process too, so one process plays both sides.
#include "models/data/cache_lock.hpp"
#include "models/data/dataset_cache.hpp"
#include "models/data/dataset_cache_entries.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace satrap;
namespace fs = std::filesystem;

namespace {

fs::path fresh_root(const char* name) {
  auto root = fs::temp_directory_path() / (std::string(name) + "-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  return root;
}

}  // namespace

TEST_CASE("a data set held shared is kept by dataset_cache_remove, a free one deleted") {
  auto root = fresh_root("satrap-cache-lock");
  auto dir = (root / "00000000000000aa").string();
  fs::create_directories(dir);
  std::ofstream(dir + "/f0-c0.chunk") << "x";
  std::unique_ptr<cache_lock> reader;
  REQUIRE(cache_lock::acquire(dir, cache_lock::mode::shared, true, reader).value()
          == cache_lock::outcome::held);
  CHECK(dataset_cache_in_use(dir));
  CHECK(dataset_cache_remove(dir).value() == cache_lock::outcome::busy);
  CHECK(fs::exists(dir + "/f0-c0.chunk"));
  // A second reader shares it.
  std::unique_ptr<cache_lock> second;
  CHECK(cache_lock::acquire(dir, cache_lock::mode::shared, false, second).value()
        == cache_lock::outcome::held);
  reader.reset();
  second.reset();
  CHECK_FALSE(dataset_cache_in_use(dir));
  CHECK(dataset_cache_remove(dir).value() == cache_lock::outcome::held);
  CHECK_FALSE(fs::exists(dir));
  CHECK(dataset_cache_remove(dir).value() == cache_lock::outcome::gone);
  fs::remove_all(root);
}

TEST_CASE("a lock taken on a folder deleted meanwhile reports it gone") {
  auto root = fresh_root("satrap-cache-gone");
  auto dir = (root / "00000000000000bb").string();
  fs::create_directories(dir);
  std::unique_ptr<cache_lock> lock;
  REQUIRE(cache_lock::acquire(dir, cache_lock::mode::exclusive, true, lock).value()
          == cache_lock::outcome::held);
  fs::remove_all(dir);             // as a cleaner holding it would
  CHECK_FALSE(lock->downgrade());  // the lock is on an unlinked file now
  lock.reset();
  CHECK(cache_lock::acquire(dir, cache_lock::mode::shared, true, lock).value()
        == cache_lock::outcome::gone);
  fs::remove_all(root);
}

TEST_CASE("dataset_cache_list counts what is not satrap's and never lists it") {
  auto root = fresh_root("satrap-cache-list");
  fs::create_directories(root / "0123456789abcdef");  // a key name, but no manifest or lock
  fs::create_directories(root / "not-a-key");
  std::ofstream(root / "notes.txt") << "x";
  fs::create_directories(root / "00000000000000cc");
  std::ofstream(root / "00000000000000cc" / cache_lock_file) << "";  // an unfinished conversion
  auto listed = dataset_cache_list(root.string());
  REQUIRE(listed.ok());
  auto& l = listed.value();
  CHECK(l.foreign == 3);
  REQUIRE(l.entries.size() == 1);
  CHECK_FALSE(l.entries[0].complete);
  CHECK_FALSE(l.entries[0].in_use);
  auto not_folder = dataset_cache_list((root / "notes.txt").string());
  REQUIRE_FALSE(not_folder.ok());
  CHECK(not_folder.error().find("not a folder") != std::string::npos);
  auto missing = dataset_cache_list((root / "missing").string());
  REQUIRE(missing.ok());
  CHECK(missing->entries.empty());
  fs::remove_all(root);
}
