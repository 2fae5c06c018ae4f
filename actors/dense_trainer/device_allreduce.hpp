// The dense all-reduce among GPU trainers (NCCL), as a state machine with no actors and no CUDA in
// it, so its control flow runs on the CPU with a fake communicator (tests/actors/
// device_allreduce_test.cpp). The trainer drives it:
// - generation g starts (train_plan.generation): rank 0 `open(g)`s it: a fresh unique id, which it
//   sends to every other rank in a comm_id message (through the actors, so over the cluster's
//   connections), and joins the communicator itself; rank r `on_id(g, id)` joins when it arrives.
// - An id of an older generation is dropped; one of a newer generation aborts the communicator of
//   the current one first (recovery makes a new communicator per generation, never reuses one).
// - Joining and all-reducing never block the actor: `ready()` and `done()` poll (the trainer
//   re-polls on its clock), so a trainer whose peer died mid-step stays responsive and the
//   supervisor's kill reaches it; destroying the state (or `abort()`) aborts the communicator
//   (ncclCommAbort), which also frees the GPU work that waits for the lost peer.
// Threading: not thread-safe; owned by one trainer.
#pragma once

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace satrap {

// One rank's communicator, as the state machine sees it (NCCL: nccl_device_comm.cpp).
class device_comm {
 public:
  virtual ~device_comm() = default;  // aborts the communicator if it is still open
  // false while the (non-blocking) join is under way; an error when it failed.
  virtual caf::expected<bool> joined() = 0;
  // Starts the sum all-reduce of n floats in place at `values` (device memory for NCCL).
  virtual caf::error all_reduce_start(float* values, size_t n) = 0;
  // false while the last all-reduce runs; an error when it failed.
  virtual caf::expected<bool> all_reduce_done() = 0;
  // Aborts the communicator (pending work is abandoned); later calls fail.
  virtual void abort() = 0;
};

struct device_comm_factory {
  // A fresh unique id (rank 0, once per generation).
  std::function<caf::expected<std::string>()> make_id;
  // Starts joining the communicator of `id` as `rank` of `world` (non-blocking).
  std::function<caf::expected<std::unique_ptr<device_comm>>(const std::string& id, int32_t world,
                                                            int32_t rank)>
    join;
};

class device_allreduce {
 public:
  device_allreduce(int32_t rank, int32_t world, device_comm_factory factory)
      : rank_(rank), world_(world), factory_(std::move(factory)) {}

  // Rank 0 at the start of `generation`: the id to send to every other rank (it joins too).
  caf::expected<std::string> open(uint64_t generation);
  // Any other rank: the id of `generation` arrived. Returns true when it joins with it, false when
  // the id is stale (an older generation, or the current one again) and was dropped.
  caf::expected<bool> on_id(uint64_t generation, const std::string& id);
  // The communicator of the current generation is joined (polls the join).
  caf::expected<bool> ready();
  // Starts the all-reduce of one step's gradients; ready() must be true and none in flight.
  caf::error start(float* values, size_t n);
  // The all-reduce started by start() finished (polls; true once, then it is no longer active).
  caf::expected<bool> done();
  // Recovery: abort the communicator; a new generation's id makes a new one.
  void abort();

  bool active() const { return active_; }
  uint64_t generation() const { return generation_; }
  bool has_comm() const { return comm_ != nullptr; }

 private:
  caf::error join(uint64_t generation, const std::string& id);

  int32_t rank_;
  int32_t world_;
  device_comm_factory factory_;
  std::unique_ptr<device_comm> comm_;
  uint64_t generation_ = 0;  // of comm_; 0: none yet (generations count from 1)
  bool joined_ = false;
  bool active_ = false;
};

}  // namespace satrap
