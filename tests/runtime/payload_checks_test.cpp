// The payload decoders at the edge (runtime/payload_checks.hpp): a well-formed message decodes to
// views of its blobs; each malformed one is refused with an invalid_payload error naming the
// field, and nothing past the message is read.
#include "runtime/error.hpp"
#include "runtime/payload_checks.hpp"
#include "satrap_schemas/step.capnp.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace satrap;

namespace {

// The error's text, or "" when `x` holds a value.
template <class T>
std::string refusal(const caf::expected<T>& x) {
  if (x)
    return "";
  CHECK(x.error().code() == static_cast<uint8_t>(errc::invalid_payload));
  return error_text(x.error());
}

bool says(const std::string& text, const std::string& what) {
  INFO(text);
  return text.find(what) != std::string::npos;
}

capnp_payload id_batch(uint32_t size, uint32_t slots, std::vector<uint32_t> offsets,
                       std::vector<uint64_t> ids) {
  capnp::MallocMessageBuilder mb;
  auto m = mb.initRoot<schema::IdBatch>();
  m.setBatch(5);
  m.setSplit(schema::Split::TEST);
  m.setSize(size);
  m.setSlots(slots);
  m.setOffsets(data_of(offsets));
  m.setIds(data_of(ids));
  return payload_encode(mb);
}

template <class S>
capnp_payload pooled(int64_t batch, uint32_t size, uint32_t slots, uint32_t dim, size_t values) {
  capnp::MallocMessageBuilder mb;
  auto m = mb.initRoot<S>();
  m.setBatch(batch);
  m.setSize(size);
  m.setSlots(slots);
  m.setDim(dim);
  m.setValues(data_of(std::vector<float>(values, 1.0f)));
  return payload_encode(mb);
}

}  // namespace

TEST_CASE("payload checks: a frame is whole words of a Cap'n Proto message") {
  capnp_payload empty;
  CHECK(says(refusal(decode_lookup_request(empty)), "empty message"));
  capnp_payload odd;
  odd.bytes.assign(13, '\0');
  CHECK(says(refusal(decode_lookup_request(odd)), "13 bytes, not a whole number of 8-byte words"));
  capnp_payload garbage;
  garbage.bytes.assign(64, '\x7f');  // a segment table claiming 2^31 segments
  CHECK(says(refusal(decode_lookup_request(garbage)), "not a valid Cap'n Proto message"));
  // A valid message cut short: its segment table promises words that are not there.
  capnp::MallocMessageBuilder mb;
  mb.initRoot<schema::LookupRequest>().setIds(data_of(std::vector<uint64_t>(8, 1)));
  auto cut = payload_encode(mb);
  cut.bytes.resize(cut.bytes.size() - 16);
  CHECK(says(refusal(decode_lookup_request(cut)), "not a valid Cap'n Proto message"));
}

TEST_CASE("payload checks: id batch offsets start at 0, never go down and end at the ids") {
  // The decoded batch reads the payload in place: the payload must outlive it.
  auto payload = id_batch(2, 2, {0, 1, 1, 3, 4}, {7, 8, 7, 9});
  auto ok = decode_id_batch(payload, 2);
  REQUIRE(ok);
  CHECK(ok->batch == 5);
  CHECK(ok->split == 1);
  CHECK(ok->offsets.size() == 5);
  CHECK(ok->ids.size() == 4);
  CHECK(ok->ids[3] == 9);
  CHECK(says(refusal(decode_id_batch(id_batch(2, 2, {0, 1, 1, 3, 4}, {7, 8, 7, 9}), 3)),
             "slots is 2, expected 3"));
  CHECK(says(refusal(decode_id_batch(id_batch(2, 2, {0, 1, 3, 4}, {7, 8, 7, 9}), 0)),
             "offsets has 4 values, expected 5"));
  CHECK(says(refusal(decode_id_batch(id_batch(1, 2, {1, 1, 2}, {7, 8}), 0)), "offsets start at 1"));
  CHECK(
    says(refusal(decode_id_batch(id_batch(1, 2, {0, 2, 1}, {7}), 0)), "offsets go down at bag 1"));
  CHECK(says(refusal(decode_id_batch(id_batch(1, 2, {0, 1, 3}, {7, 8}), 0)),
             "ids has 2 values, expected 3"));
  // ids of 12 bytes: not whole uint64 values.
  capnp::MallocMessageBuilder mb;
  auto m = mb.initRoot<schema::IdBatch>();
  m.setSize(1);
  m.setSlots(1);
  m.setOffsets(data_of(std::vector<uint32_t>{0, 1}));
  m.initIds(12);
  CHECK(says(refusal(decode_id_batch(payload_encode(mb), 0)), "ids has 12 bytes"));
}

TEST_CASE("payload checks: lookup requests and embedding rows") {
  capnp::MallocMessageBuilder mb;
  auto req = mb.initRoot<schema::LookupRequest>();
  req.setBatch(3);
  req.setReadOnly(true);
  req.setIds(data_of(std::vector<uint64_t>{4, 5, 6}));
  auto payload = payload_encode(mb);  // outlives the view decoded from it
  auto ok = decode_lookup_request(payload);
  REQUIRE(ok);
  CHECK(ok->batch == 3);
  CHECK(ok->read_only);
  CHECK(ok->ids.size() == 3);
  req.initIds(9);
  CHECK(says(refusal(decode_lookup_request(payload_encode(mb))), "ids has 9 bytes"));

  capnp::MallocMessageBuilder rb;
  auto rows = rb.initRoot<schema::EmbeddingRows>();
  rows.setBatch(8);
  rows.setDim(4);
  rows.setRows(data_of(std::vector<float>(12, 0.5f)));
  auto p = payload_encode(rb);
  REQUIRE(decode_embedding_rows(p, 8, 4, 3));
  CHECK(says(refusal(decode_embedding_rows(p, 8, 4, 4)), "rows has 12 values, expected 16"));
  CHECK(says(refusal(decode_embedding_rows(p, 8, 2, 6)), "dim is 4, expected 2"));
  CHECK(says(refusal(decode_embedding_rows(p, 9, 4, 3)), "batch is 8, expected 9"));
}

TEST_CASE("payload checks: pooled embeddings and gradients hold size x slots x dim values") {
  auto ok = decode_pooled_embeddings(pooled<schema::PooledEmbeddings>(11, 2, 3, 4, 24));
  REQUIRE(ok);
  CHECK(ok->values.size() == 24);
  CHECK(!pooled_check_shape(*ok, {11, 2, 3, 4}, "pooled embeddings"));
  CHECK(!pooled_check_shape(*ok, {11, 0, 3, 4}, "pooled embeddings"));  // any size
  CHECK(says(error_text(pooled_check_shape(*ok, {11, 2, 8, 4}, "pooled embeddings")),
             "slots is 3, expected 8"));
  CHECK(says(error_text(pooled_check_shape(*ok, {12, 2, 3, 4}, "pooled embeddings")),
             "batch is 11, expected 12"));
  CHECK(says(refusal(decode_pooled_embeddings(pooled<schema::PooledEmbeddings>(11, 2, 3, 4, 23))),
             "values has 23 values, expected 24"));
  CHECK(says(refusal(decode_pooled_gradients(pooled<schema::PooledGradients>(11, 0, 3, 4, 0))),
             "size 0 is not in"));
  // size x slots x dim = 2^24 x (2^32 - 1) x 2^16 does not fit 64 bits: refused, not wrapped.
  CHECK(says(refusal(decode_pooled_gradients(
               pooled<schema::PooledGradients>(11, 1u << 24, 0xffffffffu, 1u << 16, 0))),
             "overflows"));
}

TEST_CASE("payload checks: embedding gradients, dense batches, dense state, chunks, eval") {
  capnp::MallocMessageBuilder gb;
  auto g = gb.initRoot<schema::EmbeddingGradients>();
  g.setDim(2);
  g.setIds(data_of(std::vector<uint64_t>{1, 2}));
  g.setGrads(data_of(std::vector<float>(4, 0.1f)));
  REQUIRE(decode_embedding_gradients(payload_encode(gb), 2));
  CHECK(says(refusal(decode_embedding_gradients(payload_encode(gb), 3)), "dim is 2, expected 3"));
  g.setGrads(data_of(std::vector<float>(3, 0.1f)));
  CHECK(says(refusal(decode_embedding_gradients(payload_encode(gb), 2)),
             "grads has 3 values, expected 4"));

  capnp::MallocMessageBuilder db;
  auto d = db.initRoot<schema::DenseBatch>();
  d.setBatch(4);
  d.setSize(2);
  d.setDenseFeatures(3);
  d.setDense(data_of(std::vector<float>(6, 0.0f)));
  d.setLabels(data_of(std::vector<float>{0.0f, 1.0f}));
  REQUIRE(decode_dense_batch(payload_encode(db), 4, 0, 3));
  CHECK(says(refusal(decode_dense_batch(payload_encode(db), 4, 1, 3)), "split is 0, expected 1"));
  CHECK(says(refusal(decode_dense_batch(payload_encode(db), 4, 0, 13)),
             "denseFeatures is 3, expected 13"));
  d.setProbs(data_of(std::vector<float>{0.5f}));
  CHECK(says(refusal(decode_dense_batch(payload_encode(db), 4, 0, 3)),
             "probs has 1 values, expected 2"));

  capnp::MallocMessageBuilder sb;
  auto s = sb.initRoot<schema::DenseState>();
  s.setStep(9);
  s.setParams(data_of(std::vector<float>(5, 0.0f)));
  auto state_payload = payload_encode(sb);  // outlives the view
  auto st = decode_dense_state(state_payload, 5);
  REQUIRE(st);
  CHECK(st->step == 9);
  CHECK(
    says(refusal(decode_dense_state(payload_encode(sb), 6)), "params has 5 values, expected 6"));
  CHECK(st->ema.empty());
  s.setEma(data_of(std::vector<float>(4, 0.0f)));
  CHECK(says(refusal(decode_dense_state(payload_encode(sb), 5)), "ema has 4 values, expected 5"));
  s.setEma(data_of(std::vector<float>(5, 0.0f)));
  REQUIRE(decode_dense_state(payload_encode(sb), 5));
  s.setStep(-2);
  CHECK(says(refusal(decode_dense_state(payload_encode(sb), 5)), "step -2"));

  capnp::MallocMessageBuilder cb;
  auto c = cb.initRoot<schema::DenseChunk>();
  c.setStep(3);
  c.setPhase(1);
  c.setRound(2);
  c.setChunk(0);
  c.setValues(data_of(std::vector<float>(7, 0.0f)));
  REQUIRE(decode_dense_chunk(payload_encode(cb), {3, 1, 2, 0, 7}));
  CHECK(says(refusal(decode_dense_chunk(payload_encode(cb), {3, 1, 1, 0, 7})),
             "round is 2, expected 1"));
  CHECK(says(refusal(decode_dense_chunk(payload_encode(cb), {3, 1, 2, 0, 8})),
             "values has 7 values, expected 8"));

  capnp::MallocMessageBuilder eb;
  auto e = eb.initRoot<schema::EvalResult>();
  e.setLogits(data_of(std::vector<float>(3, 0.0f)));
  e.setLabels(data_of(std::vector<float>(3, 1.0f)));
  REQUIRE(decode_eval_result(payload_encode(eb)));
  e.setLabels(data_of(std::vector<float>(2, 1.0f)));
  CHECK(says(refusal(decode_eval_result(payload_encode(eb))), "labels has 2 values, expected 3"));
  e.setLabels(data_of(std::vector<float>(3, 1.0f)));
  e.setGroups(data_of(std::vector<uint64_t>{7, 7, 9}));
  auto eval_payload = payload_encode(eb);  // outlives the view
  auto ev = decode_eval_result(eval_payload);
  REQUIRE(ev);
  CHECK(ev->groups.size() == 3);
  e.setGroups(data_of(std::vector<uint64_t>{7}));
  CHECK(says(refusal(decode_eval_result(payload_encode(eb))), "groups has 1 values, expected 3"));
}

TEST_CASE("payload checks: the validation split and the groups blob of a dense batch") {
  capnp::MallocMessageBuilder db;
  auto d = db.initRoot<schema::DenseBatch>();
  d.setBatch(4);
  d.setSplit(schema::Split::VALIDATION);
  d.setSize(2);
  d.setDenseFeatures(1);
  d.setDense(data_of(std::vector<float>(2, 0.0f)));
  d.setLabels(data_of(std::vector<float>{0.0f, 1.0f}));
  d.setGroups(data_of(std::vector<uint64_t>{3, 5}));
  auto batch_payload = payload_encode(db);              // outlives the view
  auto v = decode_dense_batch(batch_payload, 4, 2, 1);  // split_code(validation) == 2
  REQUIRE(v);
  CHECK(v->groups.size() == 2);
  CHECK(v->groups[1] == 5);
  CHECK(says(refusal(decode_dense_batch(payload_encode(db), 4, 1, 1)), "split is 2, expected 1"));
  d.setGroups(data_of(std::vector<uint64_t>{3}));
  CHECK(says(refusal(decode_dense_batch(payload_encode(db), 4, 2, 1)),
             "groups has 1 values, expected 2"));

  capnp::MallocMessageBuilder ib;
  auto in = ib.initRoot<schema::IdBatch>();
  in.setBatch(1);
  in.setSplit(schema::Split::VALIDATION);
  in.setSize(1);
  in.setSlots(1);
  in.setOffsets(data_of(std::vector<uint32_t>{0, 1}));
  in.setIds(data_of(std::vector<uint64_t>{42}));
  auto ids_payload = payload_encode(ib);  // outlives the view
  auto ids = decode_id_batch(ids_payload, 1);
  REQUIRE(ids);
  CHECK(ids->split == 2);
}
