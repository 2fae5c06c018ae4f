// Unpooled sequences: a sequence feature with `pooling: none` reaches the dense model as its ids in
// order, one embedding per position, with its length, instead of one pooled vector.
//
// The data (readers, binary cache, synthetic history) holds a sequence as a bag of its most recent
// max_length ids, oldest first. expand_sequences turns each such bag into max_length one-id
// positional slots, so the rest of satrap (de-duplication, shards, wire, pooling, gradients) is
// unchanged: a position is a bag of one id (sum-pooled: its row, times its weight when the
// feature has weights) or of none past the sequence's length (a zero vector, whose gradient goes
// nowhere). The batch's layout after expansion:
//   slots   the pooled slots (every slot that is not an unpooled sequence, in order), then each
//           unpooled sequence's max_length positions, in order of the sequences
//   dense   the data's dense features, then each unpooled sequence's length (a float, the number
//           of positions that hold an id)
// A TorchScript module sees these as forward(dense [B, D], embeddings [B, S, E],
// sequences: List[Tensor] ([B, L_k, E] each), lengths [B, K] int64) (models/dense/torchscript.hpp).
// Threading: pure functions; sequence_source is immutable and thread-safe like its inner source.
#pragma once

#include "models/data/batch_source.hpp"
#include "models/embedding/pooling.hpp"

#include <memory>
#include <string>
#include <vector>

namespace satrap {

struct unpooled_sequences {
  std::vector<int> slots;          // the data's slots that are unpooled sequences, ascending
  std::vector<int> lengths;        // each one's max_length (positions)
  std::vector<std::string> names;  // each one's feature name (messages)

  bool empty() const { return slots.empty(); }
  int positions() const {  // the sum of lengths
    int n = 0;
    for (int l : lengths)
      n += l;
    return n;
  }
  // The model's slots and dense features for data of `slots` and `dense` of them.
  int model_slots(int slots) const {
    return slots - static_cast<int>(this->slots.size()) + positions();
  }
  int model_dense(int dense) const { return dense + static_cast<int>(this->slots.size()); }
  // The model's slots' pooling from the data's (`input`, one per data slot): the pooled slots'
  // own, then sum for each position (a bag of one id or none).
  std::vector<pooling> model_pooling(const std::vector<pooling>& input) const;
};

// The batch with its unpooled sequences expanded (layout above). A sequence longer than its
// max_length keeps its most recent (last) ids.
batch expand_sequences(const batch& in, const unpooled_sequences& seq);

// A batch source whose batches are expanded as they are made.
class sequence_source final : public wrapping_source {
 public:
  sequence_source(std::shared_ptr<const batch_source> inner, unpooled_sequences seq);

  batch make_batch(data_split split, int64_t index, int batch_size) const override {
    return expand_sequences(inner_->make_batch(split, index, batch_size), seq_);
  }
  int slots() const override { return seq_.model_slots(inner_->slots()); }
  int dense_features() const override { return seq_.model_dense(inner_->dense_features()); }

 private:
  unpooled_sequences seq_;
};

}  // namespace satrap
