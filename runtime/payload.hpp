// A Cap'n Proto message carried through CAF as one contiguous byte buffer.
//
// CAF 0.17 serialises std::vector<float> element by element, about 8x slower than one raw copy.
// So every bulk payload is built with Cap'n Proto, flattened once into a capnp_payload, and read
// in place on arrival; its inspect writes it as one length-prefixed raw block (the wire format of
// CAF's std::vector<char>). Within one process CAF does not copy message contents at all.
// The buffer does not zero what it grows into (payload_bytes): a multi-MB payload is written in
// full right after (flattening, CAF's deserialiser, the store's rows), and a zeroing pass costs
// as much as the copy itself.
//
// Threading: a payload is a value; a payload_reader must not outlive the payload it reads.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "models/assert.hpp"

#include <cassert>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <type_traits>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/serializer.hpp>

namespace satrap {

// std::allocator, except that resize() and the size constructor leave new chars uninitialised.
template <class T>
struct default_init_allocator : std::allocator<T> {
  using std::allocator<T>::allocator;
  template <class U>
  struct rebind {
    using other = default_init_allocator<U>;
  };
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using payload_bytes = std::vector<char, default_init_allocator<char>>;

struct capnp_payload {
  payload_bytes bytes;  // the flat Cap'n Proto message (segment table + segments)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, capnp_payload& x) {
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    auto n = x.bytes.size();
    return caf::error::eval([&] { return f.begin_sequence(n); },
                            [&] { return n > 0 ? f.apply_raw(n, x.bytes.data()) : caf::none; },
                            [&] { return f.end_sequence(); });
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    size_t n = 0;
    return caf::error::eval([&] { return f.begin_sequence(n); },
                            [&] {
                              x.bytes.resize(n);  // uninitialised: apply_raw fills it
                              return n > 0 ? f.apply_raw(n, x.bytes.data()) : caf::none;
                            },
                            [&] { return f.end_sequence(); });
  } else {
    return f(caf::meta::type_name("capnp_payload"), x.bytes);  // to_string and the like
  }
}

// Flattens a built message into a payload (one copy of its segments).
capnp_payload payload_encode(capnp::MessageBuilder& builder);

// Builds a message straight inside a payload's bytes: its first segment is the payload buffer
// after an 8-byte segment table, so finish() only writes that table (no flattening copy of a
// multi-MB blob, no second buffer). Size it with words_for(): when the message outgrows it, the
// builder spills into more segments and finish() falls back to payload_encode.
// Threading: one thread; build, finish once, drop.
//
// `tail_bytes` > 0 promises that the message is sized exactly (words_for) and that its last
// allocation is a Data blob of that many bytes which the caller overwrites in full before
// finish(), such as rows written by the store: those words are not zeroed first (Cap'n Proto
// wants a zeroed segment; every other word is).
class payload_builder final : public capnp::MessageBuilder {
 public:
  explicit payload_builder(size_t words, size_t tail_bytes = 0);
  ~payload_builder() noexcept(false) override = default;
  capnp_payload finish();
  kj::ArrayPtr<capnp::word> allocateSegment(unsigned minimum_words) override;

  // Words of a struct of `data_words` + `pointers` with Data blobs of these byte sizes, as a root
  // (the root pointer included).
  static size_t words_for(size_t data_words, size_t pointers, std::initializer_list<size_t> blobs);

 private:
  capnp_payload payload_;
  size_t tail_bytes_ = 0;
  bool first_taken_ = false;
  std::vector<kj::Array<capnp::word>> spilled_;
};

// Large-message friendly malloc settings for the process (glibc): buffers up to 32 MiB come from
// the heap instead of fresh mmaps, and freed memory is not handed back to the kernel below
// 256 MiB. Otherwise every multi-MB payload (built, serialised, received) costs a page fault per
// 4 KiB, which under virtualisation is several times the cost of the copies themselves.
// Idempotent; called by satrap_config.
void tune_allocator_for_payloads();

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
  // A peer's blob is checked at the edge (payload_checks.hpp); this catches a caller that skipped it.
  SATRAP_ASSERT(d.size() % sizeof(T) == 0, "blob of {} bytes", d.size());
  SATRAP_ASSERT(reinterpret_cast<std::uintptr_t>(d.begin()) % alignof(T) == 0);
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
