// Decoders that check a payload from another process before anything reads it.
//
// Every bulk message (schemas/step.capnp) may come from a peer process: a satrap of another
// version, a damaged frame, a bug on the other side. Its sizes are never trusted: each decoder
// below reads the message inside a kj::Exception guard, checks that every blob has a whole number
// of elements and exactly the count its header fields (or the receiver's own expectations)
// promise, that offsets start at 0, never go down and end at the ids' count, and that the
// dimensions are the receiver's. The answer is either views of the message's blobs, safe to index
// with the checked counts, or an errc::invalid_payload error that says which field is wrong and by
// how much; actors reply with that error instead of reading out of bounds.
//
// The views point into the payload's bytes: they are valid while the payload lives and is not
// moved from (a std::vector keeps its buffer when the payload object is moved).
// Threading: plain functions, no state.
#pragma once

#include "runtime/payload.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <span>

namespace satrap {

// A frame: a non-empty whole number of 8-byte words, word-aligned (Cap'n Proto's flat framing).
caf::error payload_check_frame(const capnp_payload& p, const char* what);

// data_loader -> gradient_aggregator. `slots`: the receiver's slot count (0: any).
struct id_batch_view {
  int64_t batch = 0;
  int8_t split = 0;   // 0 train, 1 test, 2 validation (split_code)
  uint32_t size = 0;  // samples
  uint32_t slots = 0;
  std::span<const uint32_t> offsets;  // size*slots + 1 entries, 0 first, monotone, last = ids
  std::span<const uint64_t> ids;
  std::span<const float> weights;  // empty, or one finite weight per id
};
caf::expected<id_batch_view> decode_id_batch(const capnp_payload& p, uint32_t slots);

// gradient_aggregator -> embedding_shard.
struct lookup_request_view {
  int64_t batch = 0;
  bool read_only = false;
  std::span<const uint64_t> ids;
};
caf::expected<lookup_request_view> decode_lookup_request(const capnp_payload& p);

// embedding_shard -> gradient_aggregator: `rows` rows of `dim` floats, as asked for.
struct embedding_rows_view {
  int64_t batch = 0;
  std::span<const float> rows;  // rows x dim
};
caf::expected<embedding_rows_view> decode_embedding_rows(const capnp_payload& p, int64_t batch,
                                                         uint32_t dim, size_t rows);

// PooledEmbeddings / PooledGradients: checked to hold size x slots x dim values (no overflow,
// 1 <= size <= pooled_size_max); the receiver then checks the shape it expects.
constexpr uint32_t pooled_size_max = 1u << 24;
struct pooled_view {
  int64_t batch = 0;
  uint32_t size = 0;
  uint32_t slots = 0;
  uint32_t dim = 0;
  std::span<const float> values;  // size x slots x dim
};
// gradient_aggregator -> dense_trainer.
caf::expected<pooled_view> decode_pooled_embeddings(const capnp_payload& p);
// dense_trainer -> gradient_aggregator.
caf::expected<pooled_view> decode_pooled_gradients(const capnp_payload& p);

// What a receiver knows of the batch; size 0: any.
struct pooled_shape {
  int64_t batch = 0;
  uint32_t size = 0;
  uint32_t slots = 0;
  uint32_t dim = 0;
};
// caf::none when `v` has that shape, else an invalid_payload error naming the field (`what`:
// "pooled embeddings" or "pooled gradients").
caf::error pooled_check_shape(const pooled_view& v, const pooled_shape& s, const char* what);

// gradient_aggregator -> embedding_shard: one gradient row of `dim` per id.
struct embedding_gradients_view {
  int64_t batch = 0;
  std::span<const uint64_t> ids;
  std::span<const float> grads;  // ids x dim
};
caf::expected<embedding_gradients_view> decode_embedding_gradients(const capnp_payload& p,
                                                                   uint32_t dim);

// data_loader -> dense_trainer. The batch number, split and size the trainer asked for.
struct dense_batch_view {
  uint32_t size = 0;
  std::span<const float> dense;      // size x dense_features
  std::span<const float> labels;     // size x tasks
  std::span<const float> probs;      // size x tasks, or empty
  std::span<const uint64_t> groups;  // size, or empty (metrics.group_by on an evaluation split)
};
caf::expected<dense_batch_view> decode_dense_batch(const capnp_payload& p, int64_t batch,
                                                   int8_t split, uint32_t dense_features,
                                                   uint32_t tasks = 1);

// dense_trainer -> job_supervisor at a cut, and a checkpoint file back to a trainer on restore.
// `params`: the model's parameter count; m and v are checked against the optimizer by the caller
// (their sizes are whole floats here).
struct dense_state_view {
  int64_t step = 0;             // >= 0
  int64_t optimizer_steps = 0;  // >= 0
  std::span<const float> params;
  std::span<const float> m;
  std::span<const float> v;
  std::span<const float> ema;  // empty, or one per parameter
};
caf::expected<dense_state_view> decode_dense_state(const capnp_payload& p, size_t params);

// dense_trainer -> dense_trainer: one ring all-reduce chunk, exactly the one expected.
struct dense_chunk_expect {
  int64_t step = 0;
  uint8_t phase = 0;
  uint32_t round = 0;
  uint32_t chunk = 0;
  size_t values = 0;
};
caf::expected<std::span<const float>> decode_dense_chunk(const capnp_payload& p,
                                                         const dense_chunk_expect& e);

// dense_trainer -> job_supervisor: predictions on an evaluation split (test or validation).
struct eval_result_view {
  std::span<const float> logits;
  std::span<const float> labels;     // as many as logits
  std::span<const float> probs;      // as many as logits, or empty
  std::span<const uint64_t> groups;  // as many as logits, or empty (no metrics.group_by)
};
// tasks: labels per sample; logits, labels and probs are samples x tasks, groups one per sample.
caf::expected<eval_result_view> decode_eval_result(const capnp_payload& p, uint32_t tasks = 1);

}  // namespace satrap
