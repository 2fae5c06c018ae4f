#include "runtime/payload.hpp"

#include <kj/io.h>

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

namespace {

kj::ArrayPtr<const capnp::word> words_of(const capnp_payload& p) {
  assert(p.bytes.size() % sizeof(capnp::word) == 0);
  assert(reinterpret_cast<std::uintptr_t>(p.bytes.data()) % alignof(capnp::word) == 0);
  return {reinterpret_cast<const capnp::word*>(p.bytes.data()),
          p.bytes.size() / sizeof(capnp::word)};
}

capnp::ReaderOptions options_for(const capnp_payload& p) {
  capnp::ReaderOptions o;
  o.traversalLimitInWords = p.bytes.size() / sizeof(capnp::word) + 64;
  return o;
}

}  // namespace

payload_reader::payload_reader(const capnp_payload& p)
  : reader_(words_of(p), options_for(p)) {
}

}  // namespace satrap
