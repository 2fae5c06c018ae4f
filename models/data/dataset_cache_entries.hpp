// What a data cache folder (dataset_cache.hpp) holds, for `satrap cache list|clean`: satrap's own
// data sets only, each with its size, its files, when it was last used and whether a job holds it.
// A folder is satrap's when its name is a cache key (16 hex digits, as dataset_cache_build names
// them) and it holds a cache manifest or a cache lock; anything else in the folder is not
// satrap's and is only counted, never deleted.
// Threading: plain functions; safe against jobs using the cache at the same time (the locks of
// cache_lock.hpp).
#pragma once

#include "models/data/cache_lock.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace satrap {

struct dataset_cache_entry {
  std::string dir;        // the data set's folder
  bool complete = false;  // has its manifest; false: a conversion running or abandoned
  uint64_t bytes = 0;     // of every file in the folder
  uint64_t samples = 0;   // complete ones: samples kept
  std::string files;      // complete ones: its first data file, "(+N more)"
  int64_t idle_s = 0;     // seconds since it was last used (manifest or folder time)
  bool in_use = false;    // a job (or a conversion) holds its lock now
};

struct dataset_cache_listing {
  std::vector<dataset_cache_entry> entries;  // by folder name
  int foreign = 0;                           // other things in the folder (left alone)
};

// Lists `root`; a root that does not exist lists nothing (no error). An error when `root` is not
// a folder or cannot be read.
result<dataset_cache_listing> dataset_cache_list(const std::string& root);

// Whether someone holds `dir`'s cache lock now (a probe: it takes nothing it keeps).
bool dataset_cache_in_use(const std::string& dir);

}  // namespace satrap
