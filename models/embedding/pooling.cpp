#include "models/embedding/pooling.hpp"
#include "models/assert.hpp"

#include <cassert>
#include <cmath>
#include <cstring>

#include "models/embedding/id_map.hpp"

namespace satrap {

dedup_result dedup_ids(std::span<const uint64_t> ids) {
  dedup_result result;
  result.inverse.resize(ids.size());
  id_map map(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    bool inserted = false;
    uint32_t u = map.find_or_insert(ids[k], static_cast<uint32_t>(result.unique.size()), inserted);
    if (inserted)
      result.unique.push_back(ids[k]);
    result.inverse[k] = u;
  }
  return result;
}

namespace {

// The bag loop, with the row size a compile-time constant for the common dims (a fixed-size
// loop the compiler unrolls into whole vectors) and a run-time one otherwise. The first row of a
// bag is copied, not added to zeros: the same sums (0 + x is x), except that a -0 stays -0.
template <int Dim, class RowOf>
void pool_bags(pooling mode, int dim_rt, std::span<const uint32_t> offsets,
               std::span<const uint32_t> inverse, RowOf row_of, float* out) {
  const int dim = Dim > 0 ? Dim : dim_rt;
  size_t bags = offsets.size() - 1;
  for (size_t b = 0; b < bags; ++b) {
    float* __restrict o = out + b * static_cast<size_t>(dim);
    uint32_t begin = offsets[b], end = offsets[b + 1];
    if (begin == end) {
      for (int d = 0; d < dim; ++d)
        o[d] = 0.0f;  // inline: a memset call per bag showed in perf
      continue;
    }
    const float* __restrict first = row_of(inverse[begin]);
    for (int d = 0; d < dim; ++d)
      o[d] = first[d];
    for (uint32_t k = begin + 1; k < end; ++k) {
      const float* __restrict row = row_of(inverse[k]);
      for (int d = 0; d < dim; ++d)
        o[d] += row[d];
    }
    if (mode == pooling::mean) {
      float inv = 1.0f / static_cast<float>(end - begin);
      for (int d = 0; d < dim; ++d)
        o[d] *= inv;
    } else if (mode == pooling::sqrtn) {
      float inv = 1.0f / std::sqrt(static_cast<float>(end - begin));
      for (int d = 0; d < dim; ++d)
        o[d] *= inv;
    }
  }
}

template <class RowOf>
void pool_by_dim(pooling mode, int dim, std::span<const uint32_t> offsets,
                 std::span<const uint32_t> inverse, RowOf row_of, float* out) {
  SATRAP_ASSERT(!offsets.empty() && offsets.back() <= inverse.size());
  switch (dim) {
    case 8: return pool_bags<8>(mode, dim, offsets, inverse, row_of, out);
    case 16: return pool_bags<16>(mode, dim, offsets, inverse, row_of, out);
    case 32: return pool_bags<32>(mode, dim, offsets, inverse, row_of, out);
    case 64: return pool_bags<64>(mode, dim, offsets, inverse, row_of, out);
    default: return pool_bags<0>(mode, dim, offsets, inverse, row_of, out);
  }
}

}  // namespace

void pool_forward(pooling mode, int dim, std::span<const uint32_t> offsets,
                  std::span<const uint32_t> inverse, const float* unique_rows, float* out) {
  const size_t stride = static_cast<size_t>(dim);
  pool_by_dim(
    mode, dim, offsets, inverse,
    [unique_rows, stride](uint32_t u) { return unique_rows + u * stride; }, out);
}

void pool_forward_rows(pooling mode, int dim, std::span<const uint32_t> offsets,
                       std::span<const uint32_t> inverse, std::span<const float* const> rows,
                       float* out) {
  pool_by_dim(
    mode, dim, offsets, inverse, [rows](uint32_t u) { return rows[u]; }, out);
}

void pool_backward(pooling mode, int dim, std::span<const uint32_t> offsets,
                   std::span<const uint32_t> inverse, const float* grad_out, float* grad_unique) {
  SATRAP_ASSERT(!offsets.empty() && offsets.back() <= inverse.size());
  size_t bags = offsets.size() - 1;
  for (size_t b = 0; b < bags; ++b) {
    const float* g = grad_out + b * dim;
    uint32_t begin = offsets[b], end = offsets[b + 1];
    if (end == begin)
      continue;
    float scale = mode == pooling::mean    ? 1.0f / static_cast<float>(end - begin)
                  : mode == pooling::sqrtn ? 1.0f / std::sqrt(static_cast<float>(end - begin))
                                           : 1.0f;
    for (uint32_t k = begin; k < end; ++k) {
      float* row = grad_unique + static_cast<size_t>(inverse[k]) * dim;
      for (int d = 0; d < dim; ++d)
        row[d] += scale * g[d];
    }
  }
}

namespace {

// The scale a bag's weighted sum is multiplied by (0 when the divisor is 0).
float bag_scale(pooling mode, std::span<const float> weights, uint32_t begin, uint32_t end) {
  if (mode == pooling::sum)
    return 1.0f;
  float divisor = 0.0f;
  if (weights.empty()) {
    divisor = static_cast<float>(end - begin);
    if (mode == pooling::sqrtn)
      divisor = std::sqrt(divisor);
  } else if (mode == pooling::mean) {
    for (uint32_t k = begin; k < end; ++k)
      divisor += weights[k];
  } else {
    for (uint32_t k = begin; k < end; ++k)
      divisor += weights[k] * weights[k];
    divisor = std::sqrt(divisor);
  }
  return divisor == 0.0f ? 0.0f : 1.0f / divisor;
}

}  // namespace

void pool_forward_rows_slots(std::span<const pooling> slot_pool, std::span<const float> weights,
                             int dim, std::span<const uint32_t> offsets,
                             std::span<const uint32_t> inverse, std::span<const float* const> rows,
                             float* out) {
  SATRAP_ASSERT(!slot_pool.empty() && !offsets.empty() && offsets.back() <= inverse.size()
                  && (weights.empty() || weights.size() >= offsets.back()),
                "slots={} offsets={} inverse={} weights={}", slot_pool.size(), offsets.size(),
                inverse.size(), weights.size());
  const size_t bags = offsets.size() - 1, slots = slot_pool.size();
  for (size_t b = 0; b < bags; ++b) {
    float* __restrict o = out + b * static_cast<size_t>(dim);
    for (int d = 0; d < dim; ++d)
      o[d] = 0.0f;
    uint32_t begin = offsets[b], end = offsets[b + 1];
    if (begin == end)
      continue;
    for (uint32_t k = begin; k < end; ++k) {
      const float* __restrict row = rows[inverse[k]];
      if (weights.empty())
        for (int d = 0; d < dim; ++d)
          o[d] += row[d];
      else
        for (int d = 0; d < dim; ++d)
          o[d] += weights[k] * row[d];
    }
    float scale = bag_scale(slot_pool[b % slots], weights, begin, end);
    if (scale != 1.0f)
      for (int d = 0; d < dim; ++d)
        o[d] *= scale;
  }
}

void pool_backward_slots(std::span<const pooling> slot_pool, std::span<const float> weights,
                         int dim, std::span<const uint32_t> offsets,
                         std::span<const uint32_t> inverse, const float* grad_out,
                         float* grad_unique) {
  SATRAP_ASSERT(!slot_pool.empty() && !offsets.empty() && offsets.back() <= inverse.size()
                  && (weights.empty() || weights.size() >= offsets.back()),
                "slots={} offsets={} inverse={} weights={}", slot_pool.size(), offsets.size(),
                inverse.size(), weights.size());
  const size_t bags = offsets.size() - 1, slots = slot_pool.size();
  for (size_t b = 0; b < bags; ++b) {
    const float* g = grad_out + b * static_cast<size_t>(dim);
    uint32_t begin = offsets[b], end = offsets[b + 1];
    if (begin == end)
      continue;
    float scale = bag_scale(slot_pool[b % slots], weights, begin, end);
    for (uint32_t k = begin; k < end; ++k) {
      float s = weights.empty() ? scale : scale * weights[k];
      float* row = grad_unique + static_cast<size_t>(inverse[k]) * dim;
      for (int d = 0; d < dim; ++d)
        row[d] += s * g[d];
    }
  }
}

}  // namespace satrap
