// Intra-op BLAS threads for the dense step (issue 17: "if a single trainer leaves a core idle
// while the shards wait, let it use intra-op threads when the plan has cores to spare").
//
// OpenBLAS's thread count is one setting for the whole process, so two trainers in one process
// must not both ask for more than one thread: each trainer holds a blas_threads_lease, and
// blas_threads_apply(want) sets `want` threads only while exactly one lease is held (else 1).
// The setting is changed only when it differs from the last one set (a cached atomic), so a
// call per step costs a load.
//
// auto_blas_threads decides `training.blas_threads: 0` (auto): the process's cores when the dense
// network is big enough that its GEMMs dominate a step (dense_model_param_count >=
// blas_threads_auto_params), else 1 (a TorchScript module too: its batch is split over replicas, each
// with libtorch at one thread). Measured in tests/bench/README.md ("train_vs_torch.sh", and
// its first section for 2026-12-06): the Kaggle DLRM shape (475k parameters) runs ~1.4x faster
// with 2 threads on 2 cores, and since the batch split (batch_split.hpp) an 80k-parameter top
// 1.06-1.15x; a 13k or 33k one runs as fast either way, and the default job (~1k parameters, a
// linear top) 0.89-0.94x.
// Threading: all functions are thread-safe.
#pragma once

#include <cstdint>

#include "models/dense/model_zoo.hpp"

namespace satrap {

// Parameters of the dense network from which auto gives it the process's cores.
inline constexpr uint64_t blas_threads_auto_params = 50000;

int auto_blas_threads(const dense_model_config& model, int cores);

// Stops OpenBLAS's server threads, which it starts when the library loads: each spins in
// sched_yield for ~0.1 s (2^28 TSC cycles) before it sleeps, ~11,000 syscalls and most of a core
// at every process start (`satrap --version` included). OpenBLAS starts them again on its next
// multi-threaded call (its lazy re-init after fork). Called first thing in `satrap`'s main.
void blas_threads_quiesce();

class blas_threads_lease {
 public:
  blas_threads_lease();
  ~blas_threads_lease();
  blas_threads_lease(const blas_threads_lease&) = delete;
  blas_threads_lease& operator=(const blas_threads_lease&) = delete;
};

// The threads a trainer asking for `want` may use now: `want` (at least 1) if exactly one lease is
// held, else 1. Changes nothing (batch_split.hpp runs its own threads, OpenBLAS at 1).
int blas_threads_granted(int want);
// Sets OpenBLAS to blas_threads_granted(want) threads; returns that count.
int blas_threads_apply(int want);

}  // namespace satrap
