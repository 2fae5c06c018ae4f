#include "models/cuda/nccl_comm.hpp"

#include <nccl.h>

#include <cstring>
#include <string>

namespace satrap {

static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES);

result<std::vector<uint8_t>> nccl_comm::make_unique_id() {
  ncclUniqueId id;
  SATRAP_TRY(SATRAP_NCCL_CHECK(ncclGetUniqueId(&id)));
  std::vector<uint8_t> bytes(sizeof(id));
  std::memcpy(bytes.data(), &id, sizeof(id));
  return bytes;
}

result<std::unique_ptr<nccl_comm>> nccl_comm::init_rank(std::span<const uint8_t> id, int nranks,
                                                        int rank, int device, bool blocking) {
  if (id.size() != sizeof(ncclUniqueId))
    return make_model_error("nccl_comm::init_rank: the unique id has " + std::to_string(id.size())
                            + " bytes, expected " + std::to_string(sizeof(ncclUniqueId)));
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return make_model_error("nccl_comm::init_rank: rank " + std::to_string(rank) + " of "
                            + std::to_string(nranks) + " is out of range");
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof(uid));
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaSetDevice(device)));
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, uid, rank, &config);
  if (!(r == ncclInProgress && !blocking))
    SATRAP_TRY(SATRAP_NCCL_CHECK(r));
  return std::unique_ptr<nccl_comm>(new nccl_comm(comm, nranks, rank, device));
}

nccl_comm::~nccl_comm() { (void)destroy(); }

result<ok_t> nccl_comm::all_reduce_sum(const float* send, float* recv, size_t count,
                                       cudaStream_t stream) {
  if (comm_ == nullptr)
    return make_model_error("nccl_comm::all_reduce_sum: destroyed");
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaSetDevice(device_)));
  ncclResult_t r = ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm_, stream);
  if (r == ncclInProgress)
    return ok_t{};  // non-blocking: poll() says when it is enqueued
  return SATRAP_NCCL_CHECK(r);
}

result<bool> nccl_comm::poll() {
  if (comm_ == nullptr)
    return make_model_error("nccl_comm::poll: destroyed");
  ncclResult_t state = ncclSuccess;
  SATRAP_TRY(SATRAP_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state)));
  if (state == ncclInProgress)
    return false;
  SATRAP_TRY(SATRAP_NCCL_CHECK(state));
  return true;
}

result<ok_t> nccl_comm::abort() {
  if (comm_ == nullptr)
    return ok_t{};
  ncclComm_t comm = comm_;
  comm_ = nullptr;
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaSetDevice(device_)));
  return SATRAP_NCCL_CHECK(ncclCommAbort(comm));
}

result<ok_t> nccl_comm::destroy() {
  if (comm_ == nullptr)
    return ok_t{};
  ncclComm_t comm = comm_;
  comm_ = nullptr;
  SATRAP_TRY(SATRAP_CUDA_CHECK(cudaSetDevice(device_)));
  return SATRAP_NCCL_CHECK(ncclCommDestroy(comm));
}

int nccl_comm::version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess)
    return 0;
  return v;
}

}  // namespace satrap
