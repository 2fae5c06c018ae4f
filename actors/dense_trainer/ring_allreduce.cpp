#include "actors/dense_trainer/ring_allreduce.hpp"

#include "models/assert.hpp"
#include "runtime/payload_checks.hpp"
#include "satrap_schemas/step.capnp.h"

#include <algorithm>
#include <cassert>

namespace satrap {

std::span<float> ring_allreduce::chunk_span(uint32_t chunk) const {
  auto n = values_.size();
  auto begin = n * chunk / static_cast<size_t>(world_);
  auto end = n * (chunk + 1) / static_cast<size_t>(world_);
  return values_.subspan(begin, end - begin);
}

capnp_payload ring_allreduce::make_chunk(uint32_t chunk) const {
  capnp::MallocMessageBuilder mb;
  auto out = mb.initRoot<schema::DenseChunk>();
  out.setStep(step_);
  out.setPhase(phase_);
  out.setRound(round_);
  out.setChunk(chunk);
  auto span = chunk_span(chunk);
  out.setValues(data_of(std::span<const float>(span.data(), span.size())));
  return payload_encode(mb);
}

capnp_payload ring_allreduce::start(int64_t step, std::span<float> values) {
  SATRAP_ASSERT(!active_ && world_ > 1 && step > step_, "active={} world={} step={} last={}",
                active_, world_, step, step_);
  step_ = step;
  values_ = values;
  phase_ = 0;
  round_ = 0;
  active_ = true;
  return make_chunk(mod(rank_));
}

caf::expected<bool> ring_allreduce::receive(const capnp_payload& msg, capnp_payload& out) {
  SATRAP_ASSERT(active_, "a chunk fed to an idle all-reduce (step {})", step_);
  // Chunk rank-1 sent in this round: (rank-1-round) when reducing, (rank-round) when gathering.
  auto expected = phase_ == 0 ? mod(int64_t{rank_} - 1 - round_) : mod(int64_t{rank_} - round_);
  auto mine = chunk_span(expected);
  auto in = decode_dense_chunk(msg, {step_, phase_, round_, expected, mine.size()});
  if (!in)
    return in.error();
  auto incoming = *in;
  if (phase_ == 0)
    for (size_t i = 0; i < mine.size(); ++i)
      mine[i] += incoming[i];
  else
    std::copy(incoming.begin(), incoming.end(), mine.begin());
  // What arrived is what goes on next round.
  if (++round_ == static_cast<uint32_t>(world_ - 1)) {
    if (phase_ == 1) {
      active_ = false;
      return false;
    }
    phase_ = 1;
    round_ = 0;
    out = make_chunk(mod(int64_t{rank_} + 1));
    return true;
  }
  out = make_chunk(expected);
  return true;
}

}  // namespace satrap
