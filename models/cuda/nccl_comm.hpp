// A small NCCL communicator: one rank per GPU, all-reduce (sum) of float buffers on a stream.
// The unique id is plain bytes, so rank 0 can make it and actors can ship it to the other ranks
// in a message; every rank then calls init_rank with it (a collective call: it blocks until all
// nranks ranks joined). A one-rank communicator works (the all-reduce copies send to recv).
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
                                                     int rank, int device);

  nccl_comm(const nccl_comm&) = delete;
  nccl_comm& operator=(const nccl_comm&) = delete;
  ~nccl_comm();  // destroy(), its error dropped

  // recv[i] = sum over ranks of send[i], for count floats in device memory (in place when
  // send == recv); enqueued on `stream`, asynchronous like any NCCL call.
  result<ok_t> all_reduce_sum(const float* send, float* recv, size_t count, cudaStream_t stream);
  // Frees the communicator (after its pending work); later calls fail. Idempotent.
  result<ok_t> destroy();

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
