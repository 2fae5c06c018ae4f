#include "models/embedding/embedding_table.hpp"

#include <cassert>
#include <cmath>
#include <cstring>

namespace satrap {

void embedding_init_row(const embedding_options& options, uint64_t id, float* out) {
  uint64_t base = mix64(id ^ mix64(options.seed + 0x5851f42d4c957f2dULL));
  for (int d = 0; d < options.dim; ++d) {
    uint64_t r = mix64(base + static_cast<uint64_t>(d) * 0x9e3779b97f4a7c15ULL);
    double u = static_cast<double>(r >> 11) * 0x1.0p-53;  // [0, 1)
    out[d] = static_cast<float>((2.0 * u - 1.0) * options.init_scale);
  }
}

embedding_table::embedding_table(const embedding_options& options) : options_(options) {
  assert(options.dim > 0);
}

uint32_t embedding_table::row_of(uint64_t id) {
  bool inserted = false;
  uint32_t row = map_.find_or_insert(id, static_cast<uint32_t>(map_.size()), inserted);
  if (inserted) {
    size_t dim = options_.dim;
    weights_.resize(weights_.size() + dim);
    embedding_init_row(options_, id, weights_.data() + static_cast<size_t>(row) * dim);
    if (options_.optimizer == sparse_optimizer_kind::adagrad)
      accumulators_.resize(accumulators_.size() + dim, options_.initial_accumulator);
  }
  return row;
}

void embedding_table::lookup(std::span<const uint64_t> ids, float* out) {
  size_t dim = options_.dim;
  for (size_t k = 0; k < ids.size(); ++k) {
    uint32_t row = row_of(ids[k]);
    std::memcpy(out + k * dim, weights_.data() + static_cast<size_t>(row) * dim,
                sizeof(float) * dim);
  }
}

void embedding_table::peek(std::span<const uint64_t> ids, float* out) const {
  size_t dim = options_.dim;
  for (size_t k = 0; k < ids.size(); ++k) {
    uint32_t row = map_.find(ids[k]);
    if (row == id_map::npos)
      embedding_init_row(options_, ids[k], out + k * dim);
    else
      std::memcpy(out + k * dim, weights_.data() + static_cast<size_t>(row) * dim,
                  sizeof(float) * dim);
  }
}

void embedding_table::update(std::span<const uint64_t> ids, const float* grads) {
  size_t dim = options_.dim;
  float lr = options_.learning_rate;
  for (size_t k = 0; k < ids.size(); ++k) {
    size_t row = row_of(ids[k]);
    float* w = weights_.data() + row * dim;
    const float* g = grads + k * dim;
    if (options_.optimizer == sparse_optimizer_kind::sgd) {
      for (size_t d = 0; d < dim; ++d) w[d] -= lr * g[d];
    } else {
      float* acc = accumulators_.data() + row * dim;
      for (size_t d = 0; d < dim; ++d) {
        acc[d] += g[d] * g[d];
        w[d] -= lr * g[d] / (std::sqrt(acc[d]) + options_.eps);
      }
    }
  }
}

}  // namespace satrap
