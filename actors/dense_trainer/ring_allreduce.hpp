// Ring all-reduce of one flat gradient vector among `world` replicas, as a state machine with
// no actors in it: the trainer feeds it the chunks that arrive from rank-1 and sends what it
// returns to rank+1. Reduce-scatter (world-1 rounds) then all-gather (world-1 rounds); every
// chunk is summed by exactly one rank and copied to the others, so all replicas end with
// bit-identical sums. Messages from one peer arrive in order (CAF guarantees it per pair of
// actors), so there is never more than one expected message.
// Threading: not thread-safe; owned by one trainer.
#pragma once

#include "runtime/payload.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <span>

namespace satrap {

class ring_allreduce {
 public:
  ring_allreduce(int32_t rank, int32_t world) : rank_(rank), world_(world) {}

  // Starts reducing `values` (kept by reference until done) for `step`; returns the first
  // chunk to send to rank+1.
  capnp_payload start(int64_t step, std::span<float> values);

  // Takes the next chunk from rank-1. Returns true with `out` set when a chunk must be sent on;
  // returns false when the reduction is complete (values now hold the sums); an invalid_payload
  // error when the chunk is not the expected one (step, phase, round, chunk, length) or does not
  // decode: nothing is summed then, and the reduction cannot go on.
  caf::expected<bool> receive(const capnp_payload& chunk, capnp_payload& out);

  bool active() const { return active_; }

 private:
  capnp_payload make_chunk(uint32_t chunk) const;
  std::span<float> chunk_span(uint32_t chunk) const;
  uint32_t mod(int64_t x) const { return static_cast<uint32_t>(((x % world_) + world_) % world_); }

  int32_t rank_;
  int32_t world_;
  int64_t step_ = -1;
  std::span<float> values_;
  uint8_t phase_ = 0;  // 0: reduce-scatter, 1: all-gather
  uint32_t round_ = 0;
  bool active_ = false;
};

}  // namespace satrap
