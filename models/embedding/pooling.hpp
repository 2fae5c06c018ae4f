// Id de-duplication and bag pooling (sum / mean) for embedding lookups, forward and backward.
// Threading: free functions on caller-owned memory; thread-safe on disjoint outputs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace satrap {

enum class pooling { sum, mean };

struct dedup_result {
  std::vector<uint64_t> unique;   // distinct ids in order of first appearance
  std::vector<uint32_t> inverse;  // inverse[k] = index in unique of ids[k]
};

// Distinct ids in order of first appearance (open-addressing hash table).
dedup_result dedup_ids(std::span<const uint64_t> ids);

// out: bags x dim where bags = offsets.size()-1. Empty bag -> zeros. mean divides by the bag's count.
void pool_forward(pooling mode, int dim, std::span<const uint32_t> offsets,
                  std::span<const uint32_t> inverse, const float* unique_rows, float* out);

// The same with unique row u at rows[u] (rows where they arrived, e.g. in the shards' replies,
// instead of copied into one array first). Same results as pool_forward bit for bit.
void pool_forward_rows(pooling mode, int dim, std::span<const uint32_t> offsets,
                       std::span<const uint32_t> inverse, std::span<const float* const> rows,
                       float* out);

// grad_unique: n_unique x dim, zeroed by the caller; accumulates.
void pool_backward(pooling mode, int dim, std::span<const uint32_t> offsets,
                   std::span<const uint32_t> inverse, const float* grad_out, float* grad_unique);

}  // namespace satrap
