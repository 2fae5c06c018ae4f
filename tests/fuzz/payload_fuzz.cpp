// libFuzzer target of the payload decoders (runtime/payload_checks.hpp and the snapshot manifest's,
// models/embedding/snapshot_manifest.hpp): whatever the bytes, a decoder answers views or an
// error, never a crash or an out-of-bounds read; what it accepts is then used the way the
// receiving actor uses it, so ASan sees any read its checks let through.
//
// Input: an 8-byte header of the receiver's expectations, then the message. Header bytes:
// [0] dim (1..16), [1] slots (1..8), [2] size / rows asked for / parameter count (0..255),
// [3] variant (PAYLOAD_gradients: bit 0 picks EmbeddingGradients over PooledGradients),
// [4..7] the expected batch number (int32). The message is copied into a word-aligned buffer, as
// CAF's deserializer gives it.
// SATRAP_FUZZ_PAYLOAD picks the decoder:
//   0 id_batch, 1 lookup_request, 2 embedding_rows, 3 pooled, 4 gradients, 5 dense_state,
//   6 snapshot_manifest.
// Threading: libFuzzer calls it from one thread.
#include "models/embedding/pooling.hpp"
#include "models/embedding/snapshot_manifest.hpp"
#include "runtime/payload_checks.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#ifndef SATRAP_FUZZ_PAYLOAD
#error "define SATRAP_FUZZ_PAYLOAD"
#endif

namespace {

struct expectations {
  uint32_t dim = 1;
  uint32_t slots = 1;
  uint32_t count = 0;
  uint8_t variant = 0;
  int64_t batch = 0;
};

[[maybe_unused]] void check(bool ok) {
  if (!ok)
    std::abort();
}

// Reads every element, so that ASan sees a view that reaches past its message.
template <class T>
[[maybe_unused]] uint64_t touch(std::span<const T> xs) {
  uint64_t h = 0;
  for (const auto& x : xs) {
    uint64_t bits = 0;
    std::memcpy(&bits, &x, sizeof(T) < 8 ? sizeof(T) : 8);
    h = h * 31 + bits;
  }
  return h;
}

[[maybe_unused]] volatile uint64_t sink;

void run(const satrap::capnp_payload& p, [[maybe_unused]] const expectations& e) {
  using namespace satrap;
#if SATRAP_FUZZ_PAYLOAD == 0
  auto v = decode_id_batch(p, e.slots);
  if (!v) {
    check(!!v.error());
    return;
  }
  // What the aggregator does with it: dedup, then pool rows of the unique ids.
  auto dedup = dedup_ids(v->ids);
  std::vector<float> rows(dedup.unique.size() * e.dim, 0.5f);
  std::vector<float> out(size_t{v->size} * v->slots * e.dim);
  pool_forward(pooling::mean, static_cast<int>(e.dim), v->offsets, dedup.inverse, rows.data(),
               out.data());
  std::vector<float> grad_unique(rows.size(), 0.0f);
  pool_backward(pooling::sum, static_cast<int>(e.dim), v->offsets, dedup.inverse, out.data(),
                grad_unique.data());
  sink = touch<float>(grad_unique);
#elif SATRAP_FUZZ_PAYLOAD == 1
  auto v = decode_lookup_request(p);
  if (v)
    sink = touch(v->ids) + static_cast<uint64_t>(v->batch) + v->read_only;
#elif SATRAP_FUZZ_PAYLOAD == 2
  auto v = decode_embedding_rows(p, e.batch, e.dim, e.count);
  if (v) {
    check(v->rows.size() == size_t{e.count} * e.dim && v->batch == e.batch);
    sink = touch(v->rows);
  }
#elif SATRAP_FUZZ_PAYLOAD == 3
  auto v = decode_pooled_embeddings(p);
  if (v) {
    check(v->size >= 1 && v->size <= pooled_size_max);
    check(v->values.size() == size_t{v->size} * v->slots * v->dim);
    sink = touch(v->values);
    if (!pooled_check_shape(*v, {e.batch, e.count, e.slots, e.dim}, "pooled embeddings"))
      check(v->values.size() == size_t{v->size} * e.slots * e.dim
            && (e.count == 0 || v->size == e.count));
  }
#elif SATRAP_FUZZ_PAYLOAD == 4
  if (e.variant & 1) {
    auto v = decode_embedding_gradients(p, e.dim);
    if (v) {
      check(v->grads.size() == v->ids.size() * e.dim);
      sink = touch(v->ids) + touch(v->grads);
    }
  } else {
    auto v = decode_pooled_gradients(p);
    if (v) {
      check(v->values.size() == size_t{v->size} * v->slots * v->dim);
      sink = touch(v->values);
      if (!pooled_check_shape(*v, {e.batch, e.count, e.slots, e.dim}, "pooled gradients"))
        check(v->values.size() == size_t{v->size} * e.slots * e.dim);
    }
  }
#elif SATRAP_FUZZ_PAYLOAD == 5
  auto v = decode_dense_state(p, e.count);
  if (v) {
    check(v->params.size() == e.count && v->step >= 0 && v->optimizer_steps >= 0);
    sink = touch(v->params) + touch(v->m) + touch(v->v);
  }
#elif SATRAP_FUZZ_PAYLOAD == 6
  auto m =
    snapshot_manifest_decode({reinterpret_cast<const std::byte*>(p.bytes.data()), p.bytes.size()});
  if (m) {
    check(m->sequence > 0 && m->parent < m->sequence && m->dim >= 1);
    for (auto& f : m->files)
      check(!f.name.empty() && f.name.find('/') == std::string::npos && f.name != "..");
  } else {
    check(!m.error().empty());
  }
#else
#error "unknown SATRAP_FUZZ_PAYLOAD"
#endif
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8)
    return 0;
  expectations e;
  e.dim = 1 + data[0] % 16;
  e.slots = 1 + data[1] % 8;
  e.count = data[2];
  e.variant = data[3];
  int32_t batch;
  std::memcpy(&batch, data + 4, 4);
  e.batch = batch;
  satrap::capnp_payload p;
  p.bytes.assign(reinterpret_cast<const char*>(data) + 8,
                 reinterpret_cast<const char*>(data) + size);
  run(p, e);
  return 0;
}
