#include "runtime/payload_checks.hpp"

#include <cmath>

#include "runtime/error.hpp"
#include "satrap_schemas/step.capnp.h"

#include <kj/exception.h>

#include <string>

namespace satrap {

namespace {

// What a user can do about any of these: it is never their input, always a peer's message.
constexpr const char* hint =
  " (a peer sent a malformed message: check that every node runs the "
  "same satrap version)";

caf::error bad(const char* what, const std::string& why) {
  return make_error(errc::invalid_payload, std::string(what) + ": " + why + hint);
}

// Views a blob as T[], refusing a partial element.
template <class T>
caf::error blob(const char* what, const char* field, capnp::Data::Reader d,
                std::span<const T>& out) {
  if (d.size() % sizeof(T) != 0)
    return bad(what, std::string(field) + " has " + std::to_string(d.size())
                       + " bytes, not a whole number of " + std::to_string(sizeof(T))
                       + "-byte values");
  if (reinterpret_cast<std::uintptr_t>(d.begin()) % alignof(T) != 0)
    return bad(what, std::string(field) + " is not aligned");
  out = {reinterpret_cast<const T*>(d.begin()), d.size() / sizeof(T)};
  return caf::none;
}

// The wire's Split as split_code numbers it (runtime/batch_key.hpp): train 0, test 1, validation 2.
int split_number(schema::Split s) {
  switch (s) {
    case schema::Split::TRAIN: return 0;
    case schema::Split::TEST: return 1;
    case schema::Split::VALIDATION: return 2;
  }
  return 3;  // a value from a newer schema: never equal to an expected split
}

caf::error count(const char* what, const char* field, uint64_t got, uint64_t want,
                 const char* because) {
  if (got == want)
    return caf::none;
  return bad(what, std::string(field) + " has " + std::to_string(got) + " values, expected "
                     + std::to_string(want) + " (" + because + ")");
}

template <class T>
caf::error equal(const char* what, const char* field, T got, T want) {
  if (got == want)
    return caf::none;
  return bad(
    what, std::string(field) + " is " + std::to_string(got) + ", expected " + std::to_string(want));
}

// Runs `decode` on a reader of `p` with Cap'n Proto's own bounds checks turned into an error.
template <class T, class F>
caf::expected<T> guarded(const capnp_payload& p, const char* what, F&& decode) {
  if (auto e = payload_check_frame(p, what))
    return e;
  try {
    payload_reader reader(p);
    return decode(reader);
  } catch (const kj::Exception& e) {
    return bad(what, std::string("not a valid Cap'n Proto message: ") + e.getDescription().cStr());
  }
}

// Checks in order; the first error wins.
#define SATRAP_CHECK(expr)  \
  do {                      \
    if (auto err_ = (expr)) \
      return err_;          \
  } while (false)

}  // namespace

caf::error payload_check_frame(const capnp_payload& p, const char* what) {
  if (p.bytes.empty())
    return bad(what, "empty message");
  if (p.bytes.size() % sizeof(capnp::word) != 0)
    return bad(what, std::to_string(p.bytes.size()) + " bytes, not a whole number of 8-byte words");
  if (reinterpret_cast<std::uintptr_t>(p.bytes.data()) % alignof(capnp::word) != 0)
    return bad(what, "buffer not word-aligned");
  return caf::none;
}

caf::expected<id_batch_view> decode_id_batch(const capnp_payload& p, uint32_t slots) {
  constexpr const char* what = "id batch";
  return guarded<id_batch_view>(p, what, [&](payload_reader& r) -> caf::expected<id_batch_view> {
    auto in = r.root<schema::IdBatch>();
    id_batch_view v;
    v.batch = in.getBatch();
    v.split = split_number(in.getSplit());
    v.size = in.getSize();
    v.slots = in.getSlots();
    if (v.batch < 0)
      return bad(what, "batch " + std::to_string(v.batch) + " is negative");
    if (v.split > 2)
      return bad(what, "split " + std::to_string(static_cast<unsigned>(in.getSplit()))
                         + " is not train, test or validation");
    if (slots != 0)
      SATRAP_CHECK(equal(what, "slots", v.slots, slots));
    SATRAP_CHECK(blob(what, "offsets", in.getOffsets(), v.offsets));
    SATRAP_CHECK(blob(what, "ids", in.getIds(), v.ids));
    SATRAP_CHECK(count(what, "offsets", v.offsets.size(), uint64_t{v.size} * v.slots + 1,
                       "one per bag of size x slots, plus one"));
    if (v.offsets[0] != 0)
      return bad(what, "offsets start at " + std::to_string(v.offsets[0]) + ", not 0");
    for (size_t i = 1; i < v.offsets.size(); ++i)
      if (v.offsets[i] < v.offsets[i - 1])
        return bad(what, "offsets go down at bag " + std::to_string(i - 1) + " ("
                           + std::to_string(v.offsets[i - 1]) + " then "
                           + std::to_string(v.offsets[i]) + ")");
    SATRAP_CHECK(count(what, "ids", v.ids.size(), v.offsets.back(), "the last offset"));
    SATRAP_CHECK(blob(what, "weights", in.getWeights(), v.weights));
    if (!v.weights.empty()) {
      SATRAP_CHECK(count(what, "weights", v.weights.size(), v.ids.size(), "none or one per id"));
      for (size_t i = 0; i < v.weights.size(); ++i)
        if (!std::isfinite(v.weights[i]))
          return bad(what, "weight " + std::to_string(i) + " is not finite");
    }
    return v;
  });
}

caf::expected<lookup_request_view> decode_lookup_request(const capnp_payload& p) {
  constexpr const char* what = "lookup request";
  return guarded<lookup_request_view>(p, what,
                                      [&](payload_reader& r) -> caf::expected<lookup_request_view> {
                                        auto in = r.root<schema::LookupRequest>();
                                        lookup_request_view v;
                                        v.batch = in.getBatch();
                                        v.read_only = in.getReadOnly();
                                        SATRAP_CHECK(blob(what, "ids", in.getIds(), v.ids));
                                        return v;
                                      });
}

caf::expected<embedding_rows_view> decode_embedding_rows(const capnp_payload& p, int64_t batch,
                                                         uint32_t dim, size_t rows) {
  constexpr const char* what = "embedding rows";
  return guarded<embedding_rows_view>(
    p, what, [&](payload_reader& r) -> caf::expected<embedding_rows_view> {
      auto in = r.root<schema::EmbeddingRows>();
      embedding_rows_view v;
      v.batch = in.getBatch();
      SATRAP_CHECK(equal(what, "batch", v.batch, batch));
      SATRAP_CHECK(equal(what, "dim", in.getDim(), dim));
      SATRAP_CHECK(blob(what, "rows", in.getRows(), v.rows));
      SATRAP_CHECK(count(what, "rows", v.rows.size(), uint64_t{rows} * dim,
                         "one row of dim per id asked for"));
      return v;
    });
}

namespace {

template <class Reader>
caf::expected<pooled_view> decode_pooled(const char* what, Reader in) {
  pooled_view v;
  v.batch = in.getBatch();
  v.size = in.getSize();
  v.slots = in.getSlots();
  v.dim = in.getDim();
  if (v.size == 0 || v.size > pooled_size_max)
    return bad(what, "size " + std::to_string(v.size) + " is not in [1, "
                       + std::to_string(pooled_size_max) + "]");
  SATRAP_CHECK(blob(what, "values", in.getValues(), v.values));
  uint64_t want = 0;
  if (__builtin_mul_overflow(uint64_t{v.size} * v.slots, uint64_t{v.dim}, &want))
    return bad(what, "size x slots x dim overflows");
  SATRAP_CHECK(count(what, "values", v.values.size(), want, "size x slots x dim"));
  return v;
}

}  // namespace

caf::expected<pooled_view> decode_pooled_embeddings(const capnp_payload& p) {
  constexpr const char* what = "pooled embeddings";
  return guarded<pooled_view>(p, what, [&](payload_reader& r) {
    return decode_pooled(what, r.root<schema::PooledEmbeddings>());
  });
}

caf::expected<pooled_view> decode_pooled_gradients(const capnp_payload& p) {
  constexpr const char* what = "pooled gradients";
  return guarded<pooled_view>(p, what, [&](payload_reader& r) {
    return decode_pooled(what, r.root<schema::PooledGradients>());
  });
}

caf::error pooled_check_shape(const pooled_view& v, const pooled_shape& s, const char* what) {
  SATRAP_CHECK(equal(what, "batch", v.batch, s.batch));
  if (s.size != 0)
    SATRAP_CHECK(equal(what, "size", v.size, s.size));
  SATRAP_CHECK(equal(what, "slots", v.slots, s.slots));
  SATRAP_CHECK(equal(what, "dim", v.dim, s.dim));
  return caf::none;
}

caf::expected<embedding_gradients_view> decode_embedding_gradients(const capnp_payload& p,
                                                                   uint32_t dim) {
  constexpr const char* what = "embedding gradients";
  return guarded<embedding_gradients_view>(
    p, what, [&](payload_reader& r) -> caf::expected<embedding_gradients_view> {
      auto in = r.root<schema::EmbeddingGradients>();
      embedding_gradients_view v;
      v.batch = in.getBatch();
      SATRAP_CHECK(equal(what, "dim", in.getDim(), dim));
      SATRAP_CHECK(blob(what, "ids", in.getIds(), v.ids));
      SATRAP_CHECK(blob(what, "grads", in.getGrads(), v.grads));
      SATRAP_CHECK(count(what, "grads", v.grads.size(), uint64_t{v.ids.size()} * dim,
                         "one row of dim per id"));
      return v;
    });
}

caf::expected<dense_batch_view> decode_dense_batch(const capnp_payload& p, int64_t batch,
                                                   int8_t split, uint32_t dense_features,
                                                   uint32_t tasks) {
  constexpr const char* what = "dense batch";
  return guarded<dense_batch_view>(
    p, what, [&](payload_reader& r) -> caf::expected<dense_batch_view> {
      auto in = r.root<schema::DenseBatch>();
      dense_batch_view v;
      v.size = in.getSize();
      SATRAP_CHECK(equal(what, "batch", in.getBatch(), batch));
      SATRAP_CHECK(equal<int>(what, "split", split_number(in.getSplit()), split));
      SATRAP_CHECK(equal(what, "denseFeatures", in.getDenseFeatures(), dense_features));
      if (v.size == 0)
        return bad(what, "size is 0");
      SATRAP_CHECK(blob(what, "dense", in.getDense(), v.dense));
      SATRAP_CHECK(blob(what, "labels", in.getLabels(), v.labels));
      SATRAP_CHECK(blob(what, "probs", in.getProbs(), v.probs));
      SATRAP_CHECK(blob(what, "groups", in.getGroups(), v.groups));
      SATRAP_CHECK(count(what, "dense", v.dense.size(), uint64_t{v.size} * dense_features,
                         "size x denseFeatures"));
      SATRAP_CHECK(count(what, "labels", v.labels.size(), uint64_t{v.size} * tasks,
                         "size x tasks (one per sample and label)"));
      if (!v.probs.empty())
        SATRAP_CHECK(
          count(what, "probs", v.probs.size(), uint64_t{v.size} * tasks, "size x tasks, or none"));
      if (!v.groups.empty())
        SATRAP_CHECK(count(what, "groups", v.groups.size(), v.size, "one per sample, or none"));
      return v;
    });
}

caf::expected<dense_state_view> decode_dense_state(const capnp_payload& p, size_t params) {
  constexpr const char* what = "dense state";
  return guarded<dense_state_view>(
    p, what, [&](payload_reader& r) -> caf::expected<dense_state_view> {
      auto in = r.root<schema::DenseState>();
      dense_state_view v;
      v.step = in.getStep();
      v.optimizer_steps = in.getOptimizerSteps();
      if (v.step < 0 || v.optimizer_steps < 0)
        return bad(what, "step " + std::to_string(v.step) + " or optimizer steps "
                           + std::to_string(v.optimizer_steps) + " is negative");
      SATRAP_CHECK(blob(what, "params", in.getParams(), v.params));
      SATRAP_CHECK(blob(what, "m", in.getM(), v.m));
      SATRAP_CHECK(blob(what, "v", in.getV(), v.v));
      SATRAP_CHECK(blob(what, "ema", in.getEma(), v.ema));
      SATRAP_CHECK(count(what, "params", v.params.size(), params, "the model's parameters"));
      if (!v.ema.empty())
        SATRAP_CHECK(count(what, "ema", v.ema.size(), params, "the model's parameters, or none"));
      return v;
    });
}

caf::expected<std::span<const float>> decode_dense_chunk(const capnp_payload& p,
                                                         const dense_chunk_expect& e) {
  constexpr const char* what = "all-reduce chunk";
  return guarded<std::span<const float>>(
    p, what, [&](payload_reader& r) -> caf::expected<std::span<const float>> {
      auto in = r.root<schema::DenseChunk>();
      SATRAP_CHECK(equal(what, "step", in.getStep(), e.step));
      SATRAP_CHECK(equal<unsigned>(what, "phase", in.getPhase(), e.phase));
      SATRAP_CHECK(equal(what, "round", in.getRound(), e.round));
      SATRAP_CHECK(equal(what, "chunk", in.getChunk(), e.chunk));
      std::span<const float> values;
      SATRAP_CHECK(blob(what, "values", in.getValues(), values));
      SATRAP_CHECK(count(what, "values", values.size(), e.values, "the chunk's length"));
      return values;
    });
}

caf::expected<eval_result_view> decode_eval_result(const capnp_payload& p, uint32_t tasks) {
  constexpr const char* what = "eval result";
  return guarded<eval_result_view>(
    p, what, [&](payload_reader& r) -> caf::expected<eval_result_view> {
      auto in = r.root<schema::EvalResult>();
      eval_result_view v;
      SATRAP_CHECK(blob(what, "logits", in.getLogits(), v.logits));
      SATRAP_CHECK(blob(what, "labels", in.getLabels(), v.labels));
      SATRAP_CHECK(blob(what, "probs", in.getProbs(), v.probs));
      SATRAP_CHECK(blob(what, "groups", in.getGroups(), v.groups));
      SATRAP_CHECK(count(what, "labels", v.labels.size(), v.logits.size(), "one per logit"));
      if (!v.probs.empty())
        SATRAP_CHECK(
          count(what, "probs", v.probs.size(), v.logits.size(), "one per logit, or none"));
      if (tasks == 0 || v.logits.size() % tasks != 0)
        return bad(what, std::to_string(v.logits.size()) + " logits for " + std::to_string(tasks)
                           + " tasks (a multiple expected)");
      if (!v.groups.empty())
        SATRAP_CHECK(count(what, "groups", v.groups.size(), v.logits.size() / tasks,
                           "one per sample (logits / tasks), or none"));
      return v;
    });
}

}  // namespace satrap
