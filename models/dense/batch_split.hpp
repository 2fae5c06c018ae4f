// A CPU dense model whose step splits the batch across threads (issue 17: the dense step at the
// GEMM limit on more than one core).
//
// Why not OpenBLAS's own threads: at the Kaggle DLRM shape on 2 cores, OpenBLAS at 2 threads
// reached 160-187 GFLOP/s on the model's GEMMs where one thread reaches 96-113, and everything
// between the GEMMs (bias and ReLU passes, the interaction, the loss: ~4 ms of a ~56 ms step)
// ran on one thread. Here each thread runs the whole forward + backward of its own rows on its own
// replica of the model, with OpenBLAS at 1 thread: the GEMMs run at the one-thread rate on every
// core at once, and the passes between them are split too. Measured in tests/bench/README.md
// (dense_roofline, "the batch split").
//
// How: replica 0 owns the parameters and the gradients (params() and grads() are its). At each
// step every other replica copies the parameters (the optimizer changes them between steps),
// runs its rows, and its gradient is added into replica 0's after all are done, in part order.
// Each sample's loss, logit and pooled-embedding gradient are its own, so only the sums over the
// batch (weight and bias gradients, the loss) change, by the order of float additions: a step
// split in n parts is deterministic for n, and differs from the unsplit step in the last bits.
// Replica p is built from seed + p, so dropout draws a different mask for each part's rows
// (with one seed, two parts would drop the same units of their first rows).
//
// Threads: `threads` - 1 workers are started with the model and parked on a condition variable
// between steps (a step wakes them once). OpenBLAS's thread count is process-wide, so the split
// is taken only while this model's trainer holds the process's only blas_threads_lease
// (blas_threads.hpp); otherwise, and for batches under threads x batch_split_min_rows rows, the
// step runs on replica 0 with OpenBLAS at blas_threads_apply(threads).
// Threading: one owner, as every dense_model; the workers touch only their own replica and rows.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "models/dense/dense_model.hpp"
#include "models/dense/model_zoo.hpp"

namespace satrap {

// Rows per part below which a batch is not split: the parts' GEMMs would run below the
// one-thread rate and the wake-up would not pay.
inline constexpr int batch_split_min_rows = 128;

class batch_split_model final : public dense_model {
 public:
  // threads >= 1: the most parts a step is split into (training.blas_threads, resolved).
  batch_split_model(const dense_model_config& config, uint64_t seed, int threads);
  ~batch_split_model() override;
  batch_split_model(const batch_split_model&) = delete;
  batch_split_model& operator=(const batch_split_model&) = delete;

  std::span<float> params() override { return replicas_[0]->params(); }
  std::span<const float> params() const override { return std::as_const(*replicas_[0]).params(); }
  std::span<float> grads() override { return replicas_[0]->grads(); }
  double forward_backward(int batch, const float* dense, const float* pooled, const float* labels,
                          float loss_scale, float* logits, float* pooled_grad) override;
  void forward(int batch, const float* dense, const float* pooled, float* logits) override;

  int threads() const { return static_cast<int>(replicas_.size()); }
  int last_parts() const { return last_parts_; }  // the parts of the last step (1: not split)

 private:
  int parts_for(int batch) const;
  // Rows [begin, end) of part p of n over batch rows.
  static int part_begin(int batch, int n, int p) {
    return static_cast<int>(static_cast<int64_t>(batch) * p / n);
  }
  // Runs job(p) for p in [0, n): part 0 on the calling thread, the others on the workers; returns
  // when all are done (an exception of a part is rethrown here).
  void run_parts(int n, const std::function<void(int)>& job);
  void sync_params(int p);
  void worker(int p);

  dense_model_config config_;
  std::vector<std::unique_ptr<dense_model>> replicas_;
  std::vector<double> losses_;
  int last_parts_ = 1;

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;  // one per run_parts
  int parts_ = 0;            // of the current generation
  int pending_ = 0;          // workers still running it
  bool stop_ = false;
  const std::function<void(int)>* job_ = nullptr;
  std::exception_ptr error_;
  std::vector<std::thread> workers_;  // worker p - 1 runs part p
};

// The dense model of a CPU trainer with `threads` intra-op threads (training.blas_threads,
// resolved): a batch_split_model, which with one thread is the zoo's model with OpenBLAS at 1.
std::unique_ptr<dense_model> make_cpu_dense_model(const dense_model_config& config, uint64_t seed,
                                                  int threads);

}  // namespace satrap
