// Id de-duplication and bag pooling (sum / mean / sqrtn, optionally weighted) for embedding
// lookups, forward and backward.
// Threading: free functions on caller-owned memory; thread-safe on disjoint outputs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace satrap {

// sum: the rows added; mean: divided by the bag's count; sqrtn: divided by its square root. With
// per-id weights w (pool_*_slots): sum Σ w·e, mean Σ w·e / Σ w, sqrtn Σ w·e / sqrt(Σ w²) (as
// TensorFlow's embedding_lookup_sparse combiners); a bag whose divisor is 0 pools to zeros.
enum class pooling { sum, mean, sqrtn };

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

// Pooling per slot, with optional weights: bag b (sample-major, b = sample*slots + slot) is
// pooled by slot_pool[b % slot_pool.size()]; weights empty (every id weighs 1) or one per id
// (weights[k] for ids[k], k in offsets' range). Without weights and with sum/mean only, the
// same results as pool_forward_rows bit for bit.
void pool_forward_rows_slots(std::span<const pooling> slot_pool, std::span<const float> weights,
                             int dim, std::span<const uint32_t> offsets,
                             std::span<const uint32_t> inverse, std::span<const float* const> rows,
                             float* out);
// The backward pass of pool_forward_rows_slots: grad_unique (zeroed by the caller) accumulates
// each id's weight × the bag's scale × the bag's gradient, summed over every use of the id.
void pool_backward_slots(std::span<const pooling> slot_pool, std::span<const float> weights,
                         int dim, std::span<const uint32_t> offsets,
                         std::span<const uint32_t> inverse, const float* grad_out,
                         float* grad_unique);

}  // namespace satrap
