// Where batches come from: the synthetic generator, or a file data set through its binary cache.
// Threading: implementations are immutable after construction; make_batch is const, thread-safe
// and deterministic in (split, index, batch_size), so any loader can make any batch, in any
// order, and a loader's read position is just a batch number (recovery needs nothing else).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "models/data/batch.hpp"

namespace satrap {

// validation: the split a job chooses its model on (never trained on, never the test split).
enum class data_split { train, test, validation };

class batch_source {
 public:
  virtual ~batch_source() = default;

  // Batch `index` of `split`: samples [index*batch_size, (index+1)*batch_size) of that split's
  // sample stream. A finite test split's last batch may be smaller; the training stream of a
  // finite data set runs on through its epochs (reshuffled per epoch), so its batches are full.
  virtual batch make_batch(data_split split, int64_t index, int batch_size) const = 0;
  // Samples in one pass over the split; -1 when unbounded (synthetic data).
  virtual int64_t samples(data_split split) const = 0;
  virtual int slots() const = 0;
  virtual int dense_features() const = 0;
  // Labels per sample (data.labels): batch::labels holds size x tasks().
  virtual int tasks() const { return 1; }
  // Whether batches carry the true click probabilities (`batch::probs`), hence an oracle AUC.
  virtual bool has_teacher() const = 0;
  // A stream's read positions after the first `batches` training batches (a checkpoint's cut),
  // as JSON for the checkpoint's manifest; "" for sources whose batch number is their position.
  virtual std::string positions_after(int64_t /*batches*/) const { return {}; }
  // Those positions are in a durable checkpoint: a stream may now tell its broker (Kafka's
  // consumer group, kafka_source.hpp). Never needed for recovery.
  virtual void positions_durable(int64_t /*batches*/) const {}
  // A stream's messages after the first `batches` training batches not yet read (its lag); -1:
  // not a stream, or not known.
  virtual int64_t stream_lag(int64_t /*batches*/) const { return -1; }
};

// A source that transforms another's batches (feature crosses, unpooled sequences): everything
// it does not override is the inner source's.
class wrapping_source : public batch_source {
 public:
  explicit wrapping_source(std::shared_ptr<const batch_source> inner) : inner_(std::move(inner)) {}

  int64_t samples(data_split split) const override { return inner_->samples(split); }
  int slots() const override { return inner_->slots(); }
  int dense_features() const override { return inner_->dense_features(); }
  int tasks() const override { return inner_->tasks(); }
  bool has_teacher() const override { return inner_->has_teacher(); }
  std::string positions_after(int64_t batches) const override {
    return inner_->positions_after(batches);
  }
  void positions_durable(int64_t batches) const override { inner_->positions_durable(batches); }
  int64_t stream_lag(int64_t batches) const override { return inner_->stream_lag(batches); }

 protected:
  std::shared_ptr<const batch_source> inner_;
};

}  // namespace satrap
