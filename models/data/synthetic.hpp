// Synthetic click data with a hidden logistic "teacher", so the best possible AUC is known.
// Threading: synthetic_generator is immutable after construction; make_batch is const and
// thread-safe, and deterministic in (seed, split, index, batch_size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "models/data/batch_source.hpp"
#include "models/embedding/pooling.hpp"

namespace satrap {

// What the data looks like and how the teacher labels it.
struct synthetic_options {
  int slots = 8;               // sparse feature slots per sample
  uint64_t vocab = 100000;     // distinct ids per slot (may be huge: nothing is stored per id)
  double zipf_exponent = 1.4;  // id popularity: P(rank r) ~ r^-exponent (> 0)
  int ids_per_sample = 1;      // ids per slot per sample (bag size; duplicates possible)
  // Per slot, its bag size (e.g. MLPerf DLRM-v2's hotness profile); empty: ids_per_sample in
  // every slot. A slot's id and pair effects are the means over its bag, as with ids_per_sample.
  std::vector<int> bag_sizes;
  int dense_features = 13;  // dense features per sample, each N(0,1)
  uint64_t seed = 42;       // everything (ids, teacher, labels) follows from this
  // Teacher: logit = bias + first-order id effects + pairwise slot interactions + dense effects.
  double teacher_bias = -1.0;  // base logit (sets the click rate)
  double teacher_id_std =
    1.15;  // std of the summed per-id effects (mean over a bag, summed over slots)
  int teacher_latent_dim = 4;      // size of the teacher's per-id latent vectors
  double teacher_pair_std = 0.3;   // std of the summed pairwise dot products across slots
  double teacher_dense_std = 0.9;  // std of the linear dense-feature effect
  // Labels per sample: 1 (a click), or 2 (a click, and a purchase given the click: the second
  // label is 1 only where the first is). The purchase's logit given a click is
  // purchase_bias + purchase_correlation * (the click logit's id, pair and dense effects) +
  // sqrt(1 - correlation^2) * (effects of the same size from independent per-id and dense
  // weights). probs holds P(click) and P(click and purchase), the oracle of each task.
  int tasks = 1;
  double purchase_bias = -0.5;
  double purchase_correlation = 0.5;
  // A user history (a target-attention teacher), when history > 0 (needs slots >= 2; slot 0 is the
  // user, slot 1 the candidate item): one more slot after the others, slot `slots`, holds 1 to
  // `history` items (uniform), oldest first, of slot 1's id space (the item table, shared with the
  // candidate), drawn from the items the user likes: an item is kept with probability
  // sigmoid(2 * a(user) . a(item) / sqrt(latent)), a(.) a hidden attention vector per id. The
  // teacher adds history_weight * max over the history of a(candidate) . a(item) / sqrt(latent):
  // the candidate's closest past item matters, which a pooled history blurs.
  int history = 0;
  double history_weight = 1.5;
  // How the model gets the history (the job's choice; the generator ignores it): unpooled (a
  // sequence, [B, history, E]) or pooled by history_pool.
  bool history_unpooled = false;
  pooling history_pool = pooling::mean;
};

class synthetic_generator final : public batch_source {
 public:
  explicit synthetic_generator(const synthetic_options& options);

  // Deterministic in (seed, split, index, batch_size): any loader can make any batch, in any
  // order, on any thread. Sample i of batch `index` is sample index*batch_size+i of the split.
  batch make_batch(data_split split, int64_t index, int batch_size) const override;
  int64_t samples(data_split) const override { return -1; }
  int slots() const override { return options_.slots + (options_.history > 0 ? 1 : 0); }
  int dense_features() const override { return options_.dense_features; }
  int tasks() const override { return options_.tasks; }
  bool has_teacher() const override { return true; }

  const synthetic_options& options() const { return options_; }
  int bag_size(int slot) const {
    return options_.bag_sizes.empty() ? options_.ids_per_sample
                                      : options_.bag_sizes[static_cast<size_t>(slot)];
  }

 private:
  uint64_t sample_rank(uint64_t& rng) const;  // one Zipf rank in [1, vocab]
  double id_effect(uint64_t id) const;
  double purchase_id_effect(uint64_t id) const;
  void id_latent(uint64_t id, double* out) const;
  void attention_latent(uint64_t id, double* out) const;
  // Appends sample's history ids (drawn with rng) to `out`; returns the teacher's history term.
  double draw_history(uint64_t user, uint64_t item, uint64_t item_salt, uint64_t& rng,
                      std::vector<uint64_t>& out) const;

  synthetic_options options_;
  // Rejection-inversion Zipf sampler constants (Hörmann & Derflinger 1996).
  double h_integral_x1_ = 0.0;
  double h_integral_n_ = 0.0;
  double s_ = 0.0;
  // Normalisers that turn the teacher_*_std knobs into per-term scales.
  double id_scale_ = 0.0;
  double pair_scale_ = 0.0;
  double dense_scale_ = 0.0;
};

}  // namespace satrap
