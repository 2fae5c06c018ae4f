// A small NCCL communicator: one rank per GPU, all-reduce (sum) of float buffers on a stream.
// The unique id is plain bytes, so rank 0 can make it and actors can ship it to the other ranks
// in a message; every rank then calls init_rank with it. Blocking (the default), init_rank waits
// until all nranks ranks joined; non-blocking (NCCL's config.blocking = 0), it and the all-reduce
// return at once and poll() says when the communicator is ready again (ncclCommGetAsyncError), so
// an actor never waits inside NCCL. abort() (ncclCommAbort) tears a communicator down even while a
// peer is lost mid-collective. A one-rank communicator works (the all-reduce copies send to recv).
// Threading: a communicator is used by one thread at a time; calls on different communicators
// (ranks) run concurrently, and must, since NCCL collectives block until every rank calls them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "models/cuda/cuda_util.hpp"

struct ncclComm;  // ncclComm_t is ncclComm*

namespace satrap {

class nccl_comm {
 public:
  // A fresh unique id (NCCL_UNIQUE_ID_BYTES = 128 bytes), made once, on rank 0.
  static result<std::vector<uint8_t>> make_unique_id();
  // Joins the communicator of `id` as `rank` of `nranks` on CUDA device `device`.
  static result<std::unique_ptr<nccl_comm>> init_rank(std::span<const uint8_t> id, int nranks,
                                                      int rank, int device, bool blocking = true);

  nccl_comm(const nccl_comm&) = delete;
  nccl_comm& operator=(const nccl_comm&) = delete;
  ~nccl_comm();  // destroy(), its error dropped

  // recv[i] = sum over ranks of send[i], for count floats in device memory (in place when
  // send == recv); enqueued on `stream`, asynchronous like any NCCL call.
  result<ok_t> all_reduce_sum(const float* send, float* recv, size_t count, cudaStream_t stream);
  // Frees the communicator (after its pending work); later calls fail. Idempotent.
  result<ok_t> destroy();
  // Non-blocking communicators: false while an init or a collective is still being set up, true
  // once the communicator is ready; an error when it failed (ncclCommGetAsyncError).
  result<bool> poll();
  // Frees the communicator at once, abandoning pending work (recovery); later calls fail.
  // Idempotent.
  result<ok_t> abort();

  int rank() const { return rank_; }
  int size() const { return nranks_; }
  int device() const { return device_; }
  static int version();  // NCCL's, e.g. 22807 for 2.28.7

 private:
  nccl_comm(ncclComm* comm, int nranks, int rank, int device)
      : comm_(comm), nranks_(nranks), rank_(rank), device_(device) {}
  ncclComm* comm_ = nullptr;
  int nranks_ = 0;
  int rank_ = 0;
  int device_ = 0;
};

}  // namespace satrap
