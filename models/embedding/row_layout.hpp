// The bytes of one row: the weights (fp32 or fp16) followed by the optimizer state (fp32), as
// snapshots and restores see a row, so that a snapshot can never split an id's weights from its
// state. In memory the store keeps a group's weights apart from their states (row_slabs.hpp).
// Threading: plain values.
#pragma once

#include <cstddef>

#include "models/embedding/embedding_options.hpp"

namespace satrap {

// fp32 state slots per row: Adagrad dim, row-wise Adagrad 1, Adam 2*dim + 1 (the step count as a
// uint32 in the last slot), FTRL 2*dim (z then n), SGD none.
inline size_t optimizer_state_floats(sparse_optimizer_kind kind, int dim) {
  size_t d = static_cast<size_t>(dim);
  switch (kind) {
    case sparse_optimizer_kind::sgd: return 0;
    case sparse_optimizer_kind::adagrad: return d;
    case sparse_optimizer_kind::rowwise_adagrad: return 1;
    case sparse_optimizer_kind::adam: return 2 * d + 1;
    case sparse_optimizer_kind::ftrl: return 2 * d;
  }
  return 0;
}

struct row_layout {
  int dim = 0;              // weights per row
  bool fp16 = false;        // weights stored as IEEE half
  size_t weight_bytes = 0;  // dim * 4, or dim * 2 rounded up to 4 (state stays 4-aligned)
  size_t state_floats = 0;  // optimizer state slots
  size_t stride = 0;        // bytes per row: weight_bytes + 4 * state_floats

  static row_layout of(const embedding_options& o) {
    row_layout l;
    l.dim = o.dim;
    l.fp16 = o.precision == weight_precision::fp16;
    size_t d = static_cast<size_t>(o.dim);
    l.weight_bytes = l.fp16 ? (d * 2 + 3) / 4 * 4 : d * 4;
    l.state_floats = optimizer_state_floats(o.optimizer, o.dim);
    l.stride = l.weight_bytes + 4 * l.state_floats;
    return l;
  }
};

}  // namespace satrap
