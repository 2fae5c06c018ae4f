#include "actors/dense_trainer/device_allreduce.hpp"

#include "models/assert.hpp"
#include "runtime/error.hpp"

namespace satrap {

caf::error device_allreduce::join(uint64_t generation, const std::string& id) {
  abort();  // the previous generation's communicator, if any
  auto comm = factory_.join(id, world_, rank_);
  if (!comm)
    return comm.error();
  comm_ = std::move(*comm);
  generation_ = generation;
  return caf::none;
}

caf::expected<std::string> device_allreduce::open(uint64_t generation) {
  SATRAP_ASSERT(rank_ == 0, "rank {} opened a generation (only rank 0 makes the id)", rank_);
  if (generation <= generation_)
    return make_error(errc::invalid_config, "device all-reduce: generation "
                                              + std::to_string(generation) + " is not after "
                                              + std::to_string(generation_));
  auto id = factory_.make_id();
  if (!id)
    return id.error();
  if (auto err = join(generation, *id))
    return err;
  return id;
}

caf::expected<bool> device_allreduce::on_id(uint64_t generation, const std::string& id) {
  SATRAP_ASSERT(rank_ != 0, "rank 0 received a communicator id (it makes them)");
  if (generation <= generation_)
    return false;  // stale: an older generation's id arrived late
  if (auto err = join(generation, id))
    return err;
  return true;
}

caf::expected<bool> device_allreduce::ready() {
  if (comm_ == nullptr)
    return false;
  if (!joined_) {
    auto j = comm_->joined();
    if (!j)
      return j.error();
    joined_ = *j;
  }
  return joined_;
}

caf::error device_allreduce::start(float* values, size_t n) {
  SATRAP_ASSERT(joined_ && !active_, "start: joined={} active={}", joined_, active_);
  if (auto err = comm_->all_reduce_start(values, n))
    return err;
  active_ = true;
  return caf::none;
}

caf::expected<bool> device_allreduce::done() {
  SATRAP_ASSERT(active_, "done() without an all-reduce in flight");
  auto d = comm_->all_reduce_done();
  if (!d)
    return d.error();
  if (*d)
    active_ = false;
  return *d;
}

void device_allreduce::abort() {
  if (comm_ != nullptr)
    comm_->abort();
  comm_.reset();
  joined_ = false;
  active_ = false;
}

}  // namespace satrap
