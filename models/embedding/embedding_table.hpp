// A simple, correct in-memory embedding store with a sparse optimizer (SGD or Adagrad).
// Threading: embedding_table is not thread-safe: one owner. embedding_init_row is pure.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/embedding/id_map.hpp"

namespace satrap {

enum class sparse_optimizer_kind { sgd, adagrad };

// Embedding rows and their optimizer.
struct embedding_options {
  int dim = 16;                                                   // floats per row
  sparse_optimizer_kind optimizer = sparse_optimizer_kind::adagrad;  // sparse optimizer
  float learning_rate = 0.05f;                                    // step size
  float initial_accumulator = 0.0f;                               // Adagrad accumulator start value
  float eps = 1e-8f;                                              // Adagrad denominator guard
  float init_scale = 0.01f;                                       // rows start uniform(-s, s)
  uint64_t seed = 0;                                              // init rows follow from (seed, id)
};

// The initial row of `id`: deterministic per (seed, id), so the same on any shard.
void embedding_init_row(const embedding_options& options, uint64_t id, float* out);

class embedding_table {  // not thread-safe: one owner
 public:
  explicit embedding_table(const embedding_options& options);

  // out: ids.size() x dim; unseen ids are inserted with their initial row.
  void lookup(std::span<const uint64_t> ids, float* out);
  // Like lookup, but never inserts: an unseen id reads as its initial row (evaluation).
  void peek(std::span<const uint64_t> ids, float* out) const;
  // One optimizer step per id (ids unique; grads already summed), grads: ids.size() x dim.
  // Unseen ids are inserted first.
  void update(std::span<const uint64_t> ids, const float* grads);

  size_t size() const { return map_.size(); }
  const embedding_options& options() const { return options_; }

 private:
  uint32_t row_of(uint64_t id);  // inserting when unseen

  embedding_options options_;
  id_map map_;
  std::vector<float> weights_;       // size() x dim
  std::vector<float> accumulators_;  // size() x dim (Adagrad only)
};

}  // namespace satrap
