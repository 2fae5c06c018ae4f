#include "models/dense/batch_split.hpp"

#include <algorithm>
#include <utility>

#include "models/assert.hpp"
#include "models/dense/blas_threads.hpp"

namespace satrap {

batch_split_model::batch_split_model(const dense_model_config& config, uint64_t seed, int threads)
    : config_(config) {
  SATRAP_ASSERT(threads >= 1, "threads={}", threads);
  for (int p = 0; p < threads; ++p)
    replicas_.push_back(make_dense_model(config, seed + static_cast<uint64_t>(p)));
  losses_.resize(replicas_.size());
  for (int p = 1; p < threads; ++p)
    workers_.emplace_back([this, p] { worker(p); });
}

batch_split_model::~batch_split_model() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_)
    t.join();
}

int batch_split_model::parts_for(int batch) const {
  const int granted = std::min(blas_threads_granted(threads()), threads());
  return std::max(1, std::min(granted, batch / batch_split_min_rows));
}

void batch_split_model::worker(int p) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_)
        return;
      seen = generation_;
      if (p < parts_)
        job = job_;
    }
    if (job == nullptr)
      continue;  // not a part of this step
    std::exception_ptr failed;
    try {
      (*job)(p);
    } catch (...) {
      failed = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    if (failed && !error_)
      error_ = failed;
    if (--pending_ == 0)
      done_.notify_one();
  }
}

void batch_split_model::run_parts(int n, const std::function<void(int)>& job) {
  {
    std::lock_guard lock(mutex_);
    job_ = &job;
    parts_ = n;
    pending_ = n - 1;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  std::exception_ptr failed;
  try {
    job(0);
  } catch (...) {
    failed = std::current_exception();
  }
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (!failed)
    failed = error_;
  if (failed)
    std::rethrow_exception(failed);
}

void batch_split_model::sync_params(int p) {
  auto from = std::as_const(*replicas_[0]).params();
  auto to = replicas_[p]->params();
  std::copy(from.begin(), from.end(), to.begin());
}

double batch_split_model::forward_backward(int batch, const float* dense, const float* pooled,
                                           const float* labels, float loss_scale, float* logits,
                                           float* pooled_grad) {
  const int n = parts_for(batch);
  last_parts_ = n;
  if (n == 1) {
    blas_threads_apply(threads());
    return replicas_[0]->forward_backward(batch, dense, pooled, labels, loss_scale, logits,
                                          pooled_grad);
  }
  blas_threads_apply(1);
  const auto features = static_cast<size_t>(config_.dense_features);
  const auto emb = static_cast<size_t>(config_.slots) * static_cast<size_t>(config_.dim);
  const auto tasks = static_cast<size_t>(config_.tasks);
  const std::function<void(int)> job = [&](int p) {
    const int begin = part_begin(batch, n, p), rows = part_begin(batch, n, p + 1) - begin;
    const auto r = static_cast<size_t>(begin);
    if (p > 0)
      sync_params(p);
    losses_[static_cast<size_t>(p)] = replicas_[static_cast<size_t>(p)]->forward_backward(
      rows, dense + r * features, pooled + r * emb, labels + r * tasks, loss_scale,
      logits + r * tasks, pooled_grad + r * emb);
  };
  run_parts(n, job);
  auto sum = replicas_[0]->grads();
  double loss = losses_[0];
  for (int p = 1; p < n; ++p) {
    auto g = replicas_[static_cast<size_t>(p)]->grads();
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += g[i];
    loss += losses_[static_cast<size_t>(p)];
  }
  return loss;
}

void batch_split_model::forward(int batch, const float* dense, const float* pooled, float* logits) {
  const int n = parts_for(batch);
  last_parts_ = n;
  if (n == 1) {
    blas_threads_apply(threads());
    replicas_[0]->forward(batch, dense, pooled, logits);
    return;
  }
  blas_threads_apply(1);
  const auto features = static_cast<size_t>(config_.dense_features);
  const auto emb = static_cast<size_t>(config_.slots) * static_cast<size_t>(config_.dim);
  const auto tasks = static_cast<size_t>(config_.tasks);
  const std::function<void(int)> job = [&](int p) {
    const int begin = part_begin(batch, n, p), rows = part_begin(batch, n, p + 1) - begin;
    const auto r = static_cast<size_t>(begin);
    if (p > 0)
      sync_params(p);
    replicas_[static_cast<size_t>(p)]->forward(rows, dense + r * features, pooled + r * emb,
                                               logits + r * tasks);
  };
  run_parts(n, job);
}

std::unique_ptr<dense_model> make_cpu_dense_model(const dense_model_config& config, uint64_t seed,
                                                  int threads) {
  return std::make_unique<batch_split_model>(config, seed, std::max(threads, 1));
}

}  // namespace satrap
