#include "runtime/payload.hpp"

#include <kj/io.h>

#include <malloc.h>

#include <algorithm>

namespace satrap {

capnp_payload payload_encode(capnp::MessageBuilder& builder) {
  capnp_payload p;
  auto words = capnp::computeSerializedSizeInWords(builder);
  p.bytes.resize(words * sizeof(capnp::word));
  kj::ArrayOutputStream out(
    kj::arrayPtr(reinterpret_cast<kj::byte*>(p.bytes.data()), p.bytes.size()));
  capnp::writeMessage(out, builder);
  return p;
}

payload_builder::payload_builder(size_t words, size_t tail_bytes) : tail_bytes_(tail_bytes) {
  // The storage comes from operator new (16-byte aligned): the segment at +8 is word-aligned.
  // Cap'n Proto wants a zeroed segment: all of it but the full words of the caller's tail blob
  // (its last word stays zeroed: the blob's padding, if any, lies there).
  constexpr size_t w = sizeof(capnp::word);
  words = std::max<size_t>(words, 1);
  payload_.bytes.resize(w * (1 + words));
  size_t raw = std::min(words, (tail_bytes + w - 1) / w);
  raw = raw > 0 ? raw - 1 : 0;
  std::memset(payload_.bytes.data() + w, 0, w * (words - raw - 1));
  std::memset(payload_.bytes.data() + w * words, 0, w);  // the last word
}

kj::ArrayPtr<capnp::word> payload_builder::allocateSegment(unsigned minimum_words) {
  auto first_words = payload_.bytes.size() / sizeof(capnp::word) - 1;
  if (!first_taken_ && minimum_words <= first_words) {
    first_taken_ = true;
    return {reinterpret_cast<capnp::word*>(payload_.bytes.data() + sizeof(capnp::word)),
            first_words};
  }
  first_taken_ = true;
  auto size = std::max<size_t>(minimum_words, 1024);
  auto seg = kj::heapArray<capnp::word>(size);
  std::memset(seg.begin(), 0, size * sizeof(capnp::word));
  spilled_.push_back(std::move(seg));
  return spilled_.back();
}

capnp_payload payload_builder::finish() {
  auto segments = getSegmentsForOutput();
  if (segments.size() != 1
      || reinterpret_cast<const char*>(segments[0].begin())
           != payload_.bytes.data() + sizeof(capnp::word)) {
    // Spilled: the size given was short. With an unzeroed tail that is a bug in the caller's
    // words_for (objects may have landed on words that were not zeroed), not an input error.
    SATRAP_ASSERT(tail_bytes_ == 0,
                  "payload_builder: a message with an unzeroed tail of {} bytes "
                  "outgrew its words_for size",
                  tail_bytes_);
    return payload_encode(*this);  // flatten as usual
  }
  // Stream framing of a one-segment message: (segment count - 1) = 0, then its size in words.
  auto words = static_cast<uint32_t>(segments[0].size());
  uint32_t table[2] = {0, words};
  std::memcpy(payload_.bytes.data(), table, sizeof table);
  payload_.bytes.resize(sizeof(capnp::word) * (1 + size_t{words}));
  return std::move(payload_);
}

size_t payload_builder::words_for(size_t data_words, size_t pointers,
                                  std::initializer_list<size_t> blobs) {
  size_t words = 1 + data_words + pointers;
  for (auto b : blobs)
    words += (b + sizeof(capnp::word) - 1) / sizeof(capnp::word);
  return words;
}

void tune_allocator_for_payloads() {
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

namespace {

kj::ArrayPtr<const capnp::word> words_of(const capnp_payload& p) {
  SATRAP_ASSERT(p.bytes.size() % sizeof(capnp::word) == 0, "payload of {} bytes", p.bytes.size());
  SATRAP_ASSERT(reinterpret_cast<std::uintptr_t>(p.bytes.data()) % alignof(capnp::word) == 0);
  return {reinterpret_cast<const capnp::word*>(p.bytes.data()),
          p.bytes.size() / sizeof(capnp::word)};
}

capnp::ReaderOptions options_for(const capnp_payload& p) {
  capnp::ReaderOptions o;
  o.traversalLimitInWords = p.bytes.size() / sizeof(capnp::word) + 64;
  return o;
}

}  // namespace

payload_reader::payload_reader(const capnp_payload& p) : reader_(words_of(p), options_for(p)) {}

}  // namespace satrap
