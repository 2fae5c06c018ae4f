// A Cap'n Proto message carried through CAF as one contiguous byte buffer.
//
// CAF 0.17 serialises std::vector<char> with a single raw copy (its byte-sequence fast path),
// whereas std::vector<float> goes element by element, about 8x slower. So every bulk payload is
// built with Cap'n Proto, flattened once into a capnp_payload, and read in place on arrival.
// Within one process CAF does not copy message contents at all.
//
// Threading: a payload is a value; a payload_reader must not outlive the payload it reads.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cassert>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace satrap {

struct capnp_payload {
  std::vector<char> bytes;  // the flat Cap'n Proto message (segment table + segments)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, capnp_payload& x) {
  return f(caf::meta::type_name("capnp_payload"), x.bytes);
}

// Flattens a built message into a payload (one copy of its segments).
capnp_payload payload_encode(capnp::MessageBuilder& builder);

// Reads a payload in place. Limits are set from the payload's own size: it is trusted to be what it
// claims, but a malformed one still raises kj::Exception instead of reading out of bounds.
class payload_reader {
 public:
  explicit payload_reader(const capnp_payload& p);
  template <class T>
  typename T::Reader root() {
    return reader_.getRoot<T>();
  }

 private:
  capnp::FlatArrayMessageReader reader_;
};

// Views a Data blob as an array of T (little-endian host assumed, as everywhere in satrap).
template <class T>
std::span<const T> data_view(capnp::Data::Reader d) {
  assert(d.size() % sizeof(T) == 0);
  assert(reinterpret_cast<std::uintptr_t>(d.begin()) % alignof(T) == 0);
  return {reinterpret_cast<const T*>(d.begin()), d.size() / sizeof(T)};
}

// A Data blob holding the bytes of an array of T, for Builder::setX(...).
template <class T>
capnp::Data::Reader data_of(std::span<const T> xs) {
  return {reinterpret_cast<const kj::byte*>(xs.data()), xs.size_bytes()};
}
template <class T>
capnp::Data::Reader data_of(const std::vector<T>& xs) {
  return data_of(std::span<const T>(xs));
}

// Copies a Data blob of T into a vector.
template <class T>
std::vector<T> data_copy(capnp::Data::Reader d) {
  auto v = data_view<T>(d);
  return {v.begin(), v.end()};
}

}  // namespace satrap
