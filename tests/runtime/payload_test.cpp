// The Cap'n Proto <-> CAF codec: a payload survives building, CAF serialisation and reading.
#include "actors/type_registry.hpp"
#include "runtime/payload.hpp"
#include "satrap_schemas/step.capnp.h"

#include <caf/actor_system.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <doctest/doctest.h>

using namespace satrap;

namespace {

capnp_payload make_rows(int64_t batch, const std::vector<float>& rows) {
  capnp::MallocMessageBuilder mb;
  auto out = mb.initRoot<schema::EmbeddingRows>();
  out.setBatch(batch);
  out.setDim(4);
  out.setRows(data_of(rows));
  return payload_encode(mb);
}

}  // namespace

TEST_CASE("payload round trip keeps every field and reads in place") {
  std::vector<float> rows(4000);
  for (size_t i = 0; i < rows.size(); ++i)
    rows[i] = static_cast<float>(i) * 0.5f - 7.0f;
  auto p = make_rows(42, rows);
  CHECK(p.bytes.size() % 8 == 0);
  payload_reader reader(p);
  auto in = reader.root<schema::EmbeddingRows>();
  CHECK(in.getBatch() == 42);
  CHECK(in.getDim() == 4);
  auto view = data_view<float>(in.getRows());
  REQUIRE(view.size() == rows.size());
  CHECK(std::equal(view.begin(), view.end(), rows.begin()));
}

TEST_CASE("payload crosses CAF's binary serialiser as one byte sequence") {
  satrap_config cfg;
  caf::actor_system sys{cfg};
  std::vector<float> rows(1 << 16, 1.25f);
  auto p = make_rows(7, rows);
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  REQUIRE(!sink(p));
  // The byte sequence plus a small length prefix: no per-element encoding.
  CHECK(buf.size() <= p.bytes.size() + 16);
  capnp_payload q;
  caf::binary_deserializer source{sys, buf};
  REQUIRE(!source(q));
  CHECK(q.bytes == p.bytes);
  payload_reader reader(q);
  CHECK(data_view<float>(reader.root<schema::EmbeddingRows>().getRows())[100] == 1.25f);
}

TEST_CASE("a payload built from nothing reads as an empty message, not garbage") {
  capnp::MallocMessageBuilder mb;
  mb.initRoot<schema::LookupRequest>();
  auto p = payload_encode(mb);
  payload_reader reader(p);
  auto in = reader.root<schema::LookupRequest>();
  CHECK(in.getBatch() == 0);
  CHECK(data_view<uint64_t>(in.getIds()).empty());
}

TEST_CASE("payload_builder writes the message in place, byte for byte what payload_encode makes") {
  std::vector<float> rows(1001);
  for (size_t i = 0; i < rows.size(); ++i)
    rows[i] = static_cast<float>(i) - 3.0f;
  auto bytes = rows.size() * sizeof(float);
  payload_builder mb(payload_builder::words_for(2, 1, {bytes}));
  auto out = mb.initRoot<schema::EmbeddingRows>();
  out.setBatch(42);
  out.setDim(4);
  std::memcpy(out.initRows(bytes).begin(), rows.data(), bytes);
  auto p = mb.finish();
  CHECK(p.bytes == make_rows(42, rows).bytes);
  // The caller writes the tail blob itself (not zeroed first); its padding still comes out zero.
  for (int round = 0; round < 3; ++round) {  // reuses freed heap blocks that hold old bytes
    payload_builder tb(payload_builder::words_for(2, 1, {bytes}), bytes);
    auto t = tb.initRoot<schema::EmbeddingRows>();
    t.setBatch(42);
    t.setDim(4);
    std::memcpy(t.initRows(bytes).begin(), rows.data(), bytes);
    CHECK(tb.finish().bytes == p.bytes);
  }
  // Sized too small: it spills into more segments and still comes out as a valid payload.
  payload_builder small(4);
  auto out2 = small.initRoot<schema::EmbeddingRows>();
  out2.setBatch(7);
  out2.setRows(data_of(rows));
  auto q = small.finish();
  payload_reader reader(q);
  auto in = reader.root<schema::EmbeddingRows>();
  CHECK(in.getBatch() == 7);
  auto view = data_view<float>(in.getRows());
  REQUIRE(view.size() == rows.size());
  CHECK(std::equal(view.begin(), view.end(), rows.begin()));
}
