// The chunk files and manifest of the binary cache (schemas/dataset.capnp): chunk_builder writes
// one chunk; chunk_store maps a whole cache read-only (mmap) and reads samples in place.
// Threading: chunk_builder has one owner. chunk_store is immutable after open: append_sample is
// const and thread-safe (the pages are shared read-only mappings).
#pragma once

#include "models/data/batch.hpp"
#include "models/data/dataset_cache.hpp"
#include "models/data/text_format.hpp"
#include "models/result.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace satrap {

constexpr uint32_t dataset_cache_version = 1;

class chunk_builder {
 public:
  // weighted: the chunk carries a weight per id (a sample's weights, or 1 for each id of a
  // sample without them; a missing id weighs 1).
  // tasks: labels per sample (the sample's label, then its more_labels).
  chunk_builder(int slots, int dense_features, bool weighted = false, int tasks = 1);
  // Appends a parsed sample: its features grouped by slot (in their order within a slot); an
  // empty slot gets its missing id.
  void add(const text_sample& sample);
  uint32_t samples() const { return static_cast<uint32_t>(labels_.size() / tasks_); }
  // Writes the chunk to `path` and clears the builder.
  result<ok_t> write(const std::string& path);

 private:
  int slots_, dense_features_;
  bool weighted_;
  size_t tasks_;
  std::vector<uint32_t> offsets_{0};
  std::vector<float> weights_;
  std::vector<uint64_t> ids_;
  std::vector<float> dense_;
  std::vector<float> labels_;
  std::vector<int> order_;  // scratch: feature order by slot
};

struct manifest_chunk {
  std::string file;  // relative to the cache folder
  uint32_t samples = 0;
};

struct dataset_manifest {
  std::string key;
  int slots = 0;
  int dense_features = 0;
  bool weighted = false;  // chunks carry per-id weights
  int tasks = 1;          // labels per sample
  std::vector<manifest_chunk> chunks;
  dataset_stats stats;
};

// Writes <dir>/manifest.bin atomically (temporary file, then rename).
result<ok_t> manifest_write(const std::string& dir, const dataset_manifest& m);
// Reads <dir>/manifest.bin; an error when it is missing, unreadable or of another version.
result<dataset_manifest> manifest_read(const std::string& dir);

class chunk_store {
 public:
  // Maps every chunk of the cache in `dir`, holding its lock shared while open.
  static result<std::unique_ptr<chunk_store>> open(const std::string& dir);
  ~chunk_store();
  chunk_store(const chunk_store&) = delete;
  chunk_store& operator=(const chunk_store&) = delete;

  int64_t samples() const { return starts_.back(); }
  int slots() const { return manifest_.slots; }
  int dense_features() const { return manifest_.dense_features; }
  bool weighted() const { return manifest_.weighted; }
  int tasks() const { return manifest_.tasks; }
  const dataset_stats& stats() const { return manifest_.stats; }
  // Appends sample `i` (0 <= i < samples(), manifest order) to `b` (offsets must hold >= 1
  // entry); a weighted store appends its ids' weights to b.weights too, and every store its
  // tasks() labels to b.labels.
  void append_sample(int64_t i, batch& b) const;

 private:
  struct mapped_chunk {
    void* base = nullptr;
    size_t bytes = 0;
    uint32_t samples = 0;
    const uint32_t* offsets = nullptr;
    const uint64_t* ids = nullptr;
    const float* dense = nullptr;
    const float* labels = nullptr;
    const float* weights = nullptr;  // weighted stores only
  };
  chunk_store() = default;
  result<ok_t> map_chunk(const std::string& path, mapped_chunk& c) const;

  std::unique_ptr<cache_lock> lock_;  // the data set's, shared (cache_lock.hpp)
  dataset_manifest manifest_;
  std::vector<mapped_chunk> chunks_;
  std::vector<int64_t> starts_{0};  // first sample of each chunk, then the total
};

}  // namespace satrap
