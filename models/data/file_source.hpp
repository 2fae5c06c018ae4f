// A batch_source over converted file data sets (see dataset_cache.hpp): the training split from
// one cache and the test split from another, or the test split held out from the tail of the
// training cache (as the usual time-ordered Criteo split holds out the last day).
//
// Training batch k holds positions [k*B, (k+1)*B) of the training stream: epoch after epoch of
// the training split, each epoch in its own order. The shuffle is a pure function of (seed,
// epoch, position): the split is cut into windows of `shuffle_window` samples, the order of the
// full windows is permuted and the samples are permuted within each window (a random-access
// shuffle buffer: reads stay within one window at a time, so a larger-than-memory cache is
// read with locality). The test split is read in order; its last batch may be smaller.
// The validation split is a third cache, or (validation_fraction F) the training rows whose hash
// of (row, seed) falls below F: those rows leave the training split, so no row is in both. The
// split is kept as one bit per row with a running count per 64 rows (rank/select), so the i-th
// training or validation row is found by a binary search, without a per-row index. It is read in
// order like the test split.
// Threading: immutable after open; make_batch is const and thread-safe.
#pragma once

#include "models/data/batch_source.hpp"
#include "models/data/chunk_store.hpp"

#include <memory>
#include <string>
#include <vector>

namespace satrap {

struct file_source_options {
  bool shuffle = true;  // reshuffle the training split every epoch
  int64_t shuffle_window =
    1 << 14;                   // samples per shuffle window (>= 1); small enough to stay in cache
  uint64_t seed = 1;           // shuffle seed
  double test_fraction = 0.1;  // without a test cache: the tail of the training data held out
  double validation_fraction = 0.0;  // without a validation cache: rows of the training split held
                                     // out for validation, chosen by a hash of (row, seed)
};

class file_source final : public batch_source {
 public:
  // `test_dir` may be empty: then the test split is the held-out tail of the training cache.
  // `validation_dir` may be empty: then options.validation_fraction of the training rows
  // validate (0: no validation split). An error when a cache cannot be opened, the caches'
  // samples differ in shape or a split would be empty.
  static result<std::unique_ptr<file_source>> open(const std::string& train_dir,
                                                   const std::string& test_dir,
                                                   const file_source_options& options,
                                                   const std::string& validation_dir = "");

  batch make_batch(data_split split, int64_t index, int batch_size) const override;
  int64_t samples(data_split split) const override;
  int slots() const override { return train_->slots(); }
  int dense_features() const override { return train_->dense_features(); }
  int tasks() const override { return train_->tasks(); }
  bool has_teacher() const override { return false; }

  // Where training position p (0 <= p, across epochs) is in the training split; for tests.
  int64_t train_sample(int64_t position) const;
  // Whether row r of the training cache is a validation row (validation_fraction); for tests.
  bool is_validation_row(int64_t row) const;

 private:
  struct split_view {
    const chunk_store* store = nullptr;
    int64_t first = 0;  // first sample of the split in its store
    int64_t count = 0;
  };
  file_source() = default;
  // Appends training positions [first, last) to `b`; the shuffle's permutations are built once
  // per window the positions cross, not once per sample.
  void append_train(int64_t first, int64_t last, batch& b) const;
  // The i-th row of the training (ones = false) or validation (ones = true) rows of train_view_,
  // as an offset into train_view_ (validation_fraction only).
  int64_t select(int64_t i, bool ones) const;

  file_source_options options_;
  std::unique_ptr<chunk_store> train_, test_, valid_;
  split_view train_view_, test_view_, valid_view_;
  int64_t carved_rows_ = 0;           // rows of train_view_ before the validation is carved out
  std::vector<uint64_t> valid_bits_;  // validation_fraction: bit r%64 of word r/64: row r validates
  std::vector<int64_t> valid_before_;  // validation rows before each word
};

}  // namespace satrap
