// NCCL behind device_allreduce (nccl_device_comm.hpp); compiled in CUDA builds only.
#ifdef SATRAP_HAVE_CUDA
#include "actors/dense_trainer/nccl_device_comm.hpp"

#include "models/cuda/cuda_dense_model.hpp"
#include "models/cuda/nccl_comm.hpp"
#include "runtime/error.hpp"

namespace satrap {

namespace {

caf::error as_error(const std::string& what) { return make_error(errc::peer_failure, what); }

class nccl_device_comm final : public device_comm {
 public:
  nccl_device_comm(std::unique_ptr<nccl_comm> comm, cudaStream_t stream)
      : comm_(std::move(comm)), stream_(stream) {}
  ~nccl_device_comm() override { abort(); }

  caf::expected<bool> joined() override { return poll(); }

  caf::error all_reduce_start(float* values, size_t n) override {
    auto r = comm_->all_reduce_sum(values, values, n, stream_);
    return r ? caf::error{} : as_error("NCCL all-reduce: " + r.error());
  }

  caf::expected<bool> all_reduce_done() override {
    auto enqueued = poll();
    if (!enqueued || !*enqueued)
      return enqueued;
    if (auto s = SATRAP_CUDA_CHECK(cudaSetDevice(comm_->device())); !s)
      return as_error(s.error());
    cudaError_t q = cudaStreamQuery(stream_);
    if (q == cudaErrorNotReady)
      return false;
    if (auto s = SATRAP_CUDA_CHECK(q); !s)
      return as_error("NCCL all-reduce: " + s.error());
    return true;
  }

  void abort() override { (void)comm_->abort(); }  // an error here leaves nothing to do

 private:
  caf::expected<bool> poll() {
    auto p = comm_->poll();
    if (!p)
      return as_error("NCCL: " + p.error());
    return p.value();
  }

  std::unique_ptr<nccl_comm> comm_;
  cudaStream_t stream_;
};

}  // namespace

caf::expected<device_comm_factory> nccl_device_comm_factory(dense_model& model) {
  auto* gpu = dynamic_cast<cuda_dense_model*>(&model);
  if (gpu == nullptr)
    return make_error(errc::invalid_config, "NCCL all-reduce: the dense model is not on CUDA");
  device_comm_factory f;
  f.make_id = []() -> caf::expected<std::string> {
    auto id = nccl_comm::make_unique_id();
    if (!id)
      return as_error("NCCL unique id: " + id.error());
    return std::string(id.value().begin(), id.value().end());
  };
  f.join = [gpu](const std::string& id, int32_t world,
                 int32_t rank) -> caf::expected<std::unique_ptr<device_comm>> {
    auto bytes = std::span(reinterpret_cast<const uint8_t*>(id.data()), id.size());
    auto comm = nccl_comm::init_rank(bytes, world, rank, gpu->device(), /*blocking=*/false);
    if (!comm)
      return as_error("NCCL join as rank " + std::to_string(rank) + " of " + std::to_string(world)
                      + ": " + comm.error());
    return std::unique_ptr<device_comm>(
      std::make_unique<nccl_device_comm>(std::move(comm.value()), gpu->stream()));
  };
  return f;
}

}  // namespace satrap
#endif  // SATRAP_HAVE_CUDA
