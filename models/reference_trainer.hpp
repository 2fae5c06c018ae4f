// The plain single-threaded training loop the actor pipeline must reproduce exactly (staleness 0).
// Threading: reference_train is self-contained; call it from any one thread.
#pragma once

#include <cstdint>
#include <vector>

#include "models/data/synthetic.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/model_zoo.hpp"
#include "models/embedding/embedding_table.hpp"
#include "models/embedding/pooling.hpp"
#include "models/env.hpp"

namespace satrap {

// The default job's settings (`satrap train` with no options), chosen on validation AUC on the
// default synthetic data (README, "Validation, early stopping, schedules"): a DLRM whose top is one
// linear layer over [bottom, pairwise dots, raw embeddings] (dot_cat), Adagrad rows at rate 0.3
// from a 1e-6 accumulator, and the dense weights' moving average evaluated.
inline dense_model_config default_job_model() {
  dense_model_config m;
  m.interaction = dlrm_interaction::dot_cat;
  m.top = {};
  return m;
}
inline embedding_options default_job_embedding() {
  embedding_options e;
  e.learning_rate = 0.3f;
  e.initial_accumulator = 1e-6f;
  return e;
}
inline dense_optimizer_options default_job_dense() {
  dense_optimizer_options d;
  d.ema_decay = 0.9995f;
  return d;
}

// A whole reference run. The defaults are the tuned defaults of `satrap train`.
struct reference_options {
  dense_model_config model =
    default_job_model();  // dense model type and shape (slots/dense_features must match the data)
  embedding_options embedding =
    default_job_embedding();  // embedding table + sparse optimizer (dim must match model.dim)
  dense_optimizer_options dense = default_job_dense();  // dense optimizer
  pooling pool = pooling::sum;                          // bag pooling
  int batch_size = 512;                                 // samples per train/test batch
  int64_t train_batches = 24000;      // train batches (12.3M samples), split train, index 0..n-1
  int64_t test_batches = 200;         // test batches (102,400 samples), split test, index 0..n-1
  uint64_t seed = 7;                  // dense model init
  env* environment = &default_env();  // the clock of samples_per_sec
};

struct reference_result {
  std::vector<double> batch_losses;  // mean loss per train batch
  double test_auc = 0.0;
  double test_logloss = 0.0;
  double oracle_auc = 0.0;       // AUC of the teacher's probs on the test set
  double samples_per_sec = 0.0;  // train samples / train wall time (data generation included)
};

// Pooled embeddings of one batch (batch x slots x dim): dedup_ids -> table.lookup(unique) ->
// pool_forward; `dedup` and `rows` are the caller's scratch (and keep the batch's ids and rows).
void pool_batch(const batch& b, embedding_table& table, pooling mode, dedup_result& dedup,
                std::vector<float>& rows, std::vector<float>& pooled);

// Per train batch: dedup_ids -> table.lookup(unique) -> pool_forward -> forward_backward
// (loss_scale = 1/batch_size) -> dense step -> pool_backward into zeroed grad_unique ->
// table.update(unique, grad_unique). Then forward on the test batches (with the dense weights'
// moving average when dense.ema_decay > 0).
reference_result reference_train(const synthetic_generator& data, const reference_options& options);

}  // namespace satrap
