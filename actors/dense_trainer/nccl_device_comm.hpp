// The NCCL communicator behind device_allreduce (device_allreduce.hpp) for a GPU trainer: a
// non-blocking NCCL communicator on the model's device, all-reducing on the model's stream; an
// all-reduce is done when NCCL has enqueued it and the stream has run it (cudaStreamQuery).
// Only in a CUDA build (SATRAP_HAVE_CUDA). Threading: used by the owning trainer only.
#pragma once

#include "actors/dense_trainer/device_allreduce.hpp"
#include "models/dense/dense_model.hpp"

namespace satrap {

// An error when `model` is not a cuda_dense_model. The model must outlive the factory and every
// communicator it makes.
caf::expected<device_comm_factory> nccl_device_comm_factory(dense_model& model);

}  // namespace satrap
