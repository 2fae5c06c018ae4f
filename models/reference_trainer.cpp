#include "models/reference_trainer.hpp"
#include "models/assert.hpp"

#include <algorithm>
#include <cassert>
#include <chrono>

#include "models/metrics.hpp"

namespace satrap {

void pool_batch(const batch& b, embedding_table& table, pooling mode, dedup_result& dedup,
                std::vector<float>& rows, std::vector<float>& pooled) {
  int dim = table.options().dim;
  dedup = dedup_ids(b.ids);
  rows.resize(dedup.unique.size() * dim);
  table.lookup(dedup.unique, rows.data());
  pooled.resize(static_cast<size_t>(b.size) * b.slots * dim);
  pool_forward(mode, dim, b.offsets, dedup.inverse, rows.data(), pooled.data());
}

reference_result reference_train(const synthetic_generator& data,
                                 const reference_options& options) {
  SATRAP_ASSERT(options.model.slots == data.options().slots
                && options.model.dense_features == data.options().dense_features);
  SATRAP_ASSERT(options.model.dim == options.embedding.dim && options.batch_size > 0);
  const int dim = options.model.dim, bs = options.batch_size;

  embedding_table table(options.embedding);
  auto model = make_dense_model(options.model, options.seed);
  dense_optimizer optimizer(options.dense, model->params().size());

  reference_result result;
  result.batch_losses.reserve(options.train_batches);
  dedup_result dedup;
  std::vector<float> rows, pooled, pooled_grad, grad_unique, logits(bs);

  auto start = options.environment->steady_now();  // once around the loop, not per batch
  for (int64_t i = 0; i < options.train_batches; ++i) {
    batch b = data.make_batch(data_split::train, i, bs);
    pool_batch(b, table, options.pool, dedup, rows, pooled);
    pooled_grad.resize(pooled.size());
    double loss =
      model->forward_backward(bs, b.dense.data(), pooled.data(), b.labels.data(),
                              1.0f / static_cast<float>(bs), logits.data(), pooled_grad.data());
    result.batch_losses.push_back(loss / bs);
    optimizer.step(model->params(), model->grads());
    grad_unique.assign(dedup.unique.size() * dim, 0.0f);
    pool_backward(options.pool, dim, b.offsets, dedup.inverse, pooled_grad.data(),
                  grad_unique.data());
    table.update(dedup.unique, grad_unique.data());
  }
  double seconds = std::chrono::duration<double>(options.environment->steady_now() - start).count();
  result.samples_per_sec =
    seconds > 0 ? static_cast<double>(options.train_batches) * bs / seconds : 0.0;

  if (auto ema = optimizer.ema();
      !ema.empty())  // dense.ema_decay > 0: the averaged weights are evaluated
    std::copy(ema.begin(), ema.end(), model->params().begin());
  std::vector<float> all_logits, all_labels, all_probs;
  for (int64_t i = 0; i < options.test_batches; ++i) {
    batch b = data.make_batch(data_split::test, i, bs);
    pool_batch(b, table, options.pool, dedup, rows, pooled);
    model->forward(bs, b.dense.data(), pooled.data(), logits.data());
    all_logits.insert(all_logits.end(), logits.begin(), logits.end());
    all_labels.insert(all_labels.end(), b.labels.begin(), b.labels.end());
    all_probs.insert(all_probs.end(), b.probs.begin(), b.probs.end());
  }
  std::vector<float> scores(all_logits.size());
  std::transform(all_logits.begin(), all_logits.end(), scores.begin(), sigmoid);
  result.test_auc = auc_exact(scores, all_labels);
  result.test_logloss = logloss_from_logits(all_logits, all_labels);
  result.oracle_auc = auc_exact(all_probs, all_labels);
  return result;
}

}  // namespace satrap
