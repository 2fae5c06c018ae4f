// The binary cache of a text data set: converts text files (Criteo, libsvm/libfm, libffm, JSON
// lines; plain or gzip) once into Cap'n Proto chunk files plus a manifest (schemas/dataset.capnp), so later
// runs and epochs read binary samples in place instead of parsing text.
//
// The cache of a file list lives in <cache_root>/<key>/, where the key hashes the files (absolute
// path, size, mtime) and every option that changes the samples; a folder whose manifest matches is
// reused. The files are dealt round-robin to `workers` threads; every file gets its own chunks and
// the manifest lists them in file order, so the sample order does not depend on the thread count.
// Bad lines: on_error fail stops at the first one found (earliest file first) with file:line:column, reason
// and what was expected; skip drops them and counts each reason (kept in the manifest).
// Threading: dataset_cache_build is a blocking call; it starts and joins its own threads.
#pragma once

#include "models/data/cache_lock.hpp"
#include "models/data/text_format.hpp"
#include "models/env.hpp"
#include "models/result.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace satrap {

enum class on_error_policy { fail, skip };

struct dataset_convert_options {
  text_format_options format;      // line layout and slot mapping
  std::vector<std::string> files;  // the data set, in order (globs already expanded)
  on_error_policy on_error = on_error_policy::fail;  // what a bad line does
  uint32_t chunk_samples = 65536;     // samples per chunk file (the last of a file fewer)
  int workers = 1;                    // conversion threads (files are dealt round-robin)
  std::string cache_root;             // folder of the caches (created when missing)
  uint64_t cache_max_bytes = 0;       // cap of cache_root: see dataset_cache_trim; 0: none
  env* environment = &default_env();  // the clock of stats.parse_seconds
};

struct dataset_stats {
  uint64_t samples = 0;                     // samples kept
  uint64_t lines = 0;                       // lines read, blank ones included
  std::map<std::string, uint64_t> skipped;  // lines dropped under on_error skip, by reason
  double parse_seconds = 0.0;               // wall time of the text conversion
  uint64_t text_bytes = 0;                  // uncompressed text bytes parsed
};

struct cached_dataset {
  std::string dir;                   // the cache folder (holds manifest.bin)
  dataset_stats stats;               // of the conversion (read back from the manifest when reused)
  bool reused = false;               // true when a matching cache was found
  int trimmed = 0;                   // other data sets deleted for the cache's size cap
  std::shared_ptr<cache_lock> hold;  // the data set's lock, shared: keep it until the data set is
                                     // opened (chunk_store takes its own), so nothing deletes it
};

// Converts (or reuses, marking it used now) the data set's cache, then trims cache_root to
// cache_max_bytes (dataset_cache_trim, keeping this data set). Two jobs converting the same data
// set at once convert it once (the second waits on the lock, then reuses it). The error says what
// went wrong, e.g. "a.libfm:12:7: bad_label: expected ..."; it is bad_input() when it is the
// data's (a bad line, a file that cannot be opened or is not a regular file), not the machine's
// (a cache write that failed).
result<cached_dataset> dataset_cache_build(const dataset_convert_options& options);

// Deletes whole cached data sets under `root`, least recently used first (by their manifest's
// modification time, which a reuse refreshes), until the folder holds at most `max_bytes`; never
// `keep_dir`. A folder without a manifest is a conversion in progress (or an abandoned one) and
// is left alone, and so is a data set a job holds (cache_lock.hpp). Returns the data sets deleted.
int dataset_cache_trim(const std::string& root, uint64_t max_bytes, const std::string& keep_dir);

// Deletes one data set's folder when its lock can be had exclusive at once: held (deleted), busy
// (a job holds it: kept), gone (already deleted); an error when it could not be locked or deleted.
result<cache_lock::outcome> dataset_cache_remove(const std::string& dir);

// The bytes of the regular files under `dir`.
uint64_t dataset_cache_folder_bytes(const std::string& dir);

// Expands `patterns` (paths or globs, relative ones against `base_dir` when it is not empty),
// in order, each glob's matches sorted. A pattern that matches nothing, or a match that is not a
// regular file, is an error (bad_input).
result<std::vector<std::string>> expand_data_files(const std::vector<std::string>& patterns,
                                                   const std::string& base_dir);

}  // namespace satrap
