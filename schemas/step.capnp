# The bulk messages of one training step (see ../README.md, "One training step").
#
# Numeric arrays are `Data` blobs of little-endian values (the element type is in each field's
# comment) so that they are written and read with one memcpy: Cap'n Proto 0.9 exposes no raw
# pointer into a List(Float32). Every blob starts word-aligned in its segment, so readers may view
# it in place. Ids are 64-bit, already hashed into their slot's id space by the loader.
@0xd69507acb2b1b02b;

$import "/capnp/c++.capnp".namespace("satrap::schema");

enum Split { train @0; test @1; validation @2; }

# data_loader -> gradient_aggregator: the categorical part of one batch.
struct IdBatch {
  batch @0 :Int64;        # batch number within its split
  split @1 :Split;
  size @2 :UInt32;        # samples
  slots @3 :UInt32;
  offsets @4 :Data;       # uint32[size*slots + 1]; bag b = sample*slots + slot
  ids @5 :Data;           # uint64[offsets[last]]
  weights @6 :Data;       # float32[offsets[last]]: each id's pooling weight; empty: every id weighs 1
}

# data_loader -> dense_trainer: the dense part of one batch.
struct DenseBatch {
  batch @0 :Int64;
  split @1 :Split;
  size @2 :UInt32;
  denseFeatures @3 :UInt32;
  dense @4 :Data;         # float32[size*denseFeatures]
  labels @5 :Data;        # float32[size]
  probs @6 :Data;         # float32[size]: the teacher's probabilities (synthetic data), else empty
  groups @7 :Data;        # uint64[size]: evaluation splits with metrics.group_by: the group's id, else empty
}

# gradient_aggregator -> embedding_shard: the rows wanted.
struct LookupRequest {
  batch @0 :Int64;
  ids @1 :Data;           # uint64[n], unique
  readOnly @2 :Bool;      # evaluation: unseen ids read as their initial row and are not inserted
}

# embedding_shard -> gradient_aggregator: rows in the order of the request's ids.
struct EmbeddingRows {
  batch @0 :Int64;
  dim @1 :UInt32;
  rows @2 :Data;          # float32[n*dim]
}

# gradient_aggregator -> dense_trainer: pooled embeddings of one batch.
struct PooledEmbeddings {
  batch @0 :Int64;
  size @1 :UInt32;
  slots @2 :UInt32;
  dim @3 :UInt32;
  values @4 :Data;        # float32[size*slots*dim]
}

# dense_trainer -> gradient_aggregator: gradient of the loss w.r.t. the pooled embeddings.
struct PooledGradients {
  batch @0 :Int64;
  size @1 :UInt32;
  slots @2 :UInt32;
  dim @3 :UInt32;
  values @4 :Data;        # float32[size*slots*dim]
}

# gradient_aggregator -> embedding_shard: gradients summed per id, one optimizer step each.
struct EmbeddingGradients {
  batch @0 :Int64;
  dim @1 :UInt32;
  ids @2 :Data;           # uint64[n], unique
  grads @3 :Data;         # float32[n*dim]
}

# dense_trainer -> dense_trainer: one chunk of a ring all-reduce of the dense gradients.
struct DenseChunk {
  step @0 :Int64;
  phase @1 :UInt8;        # 0: reduce-scatter, 1: all-gather
  round @2 :UInt32;
  chunk @3 :UInt32;
  values @4 :Data;        # float32[chunk length]
}

# Dense parameters of one trainer (replica checks, checkpoints).
struct DenseParams {
  step @0 :Int64;
  values @1 :Data;        # float32[param count]
}

# dense_trainer -> job_supervisor at a checkpoint cut, and back on restore: the dense model with
# its optimizer state.
struct DenseState {
  step @0 :Int64;              # steps (per trainer) applied
  params @1 :Data;             # float32[param count]
  optimizerSteps @2 :Int64;
  m @3 :Data;                  # float32: Adagrad accumulator / Adam first moment (empty for SGD)
  v @4 :Data;                  # float32: Adam second moment (empty otherwise)
  ema @5 :Data;                # float32: the weights' moving average (empty unless ema_decay > 0)
}

# dense_trainer -> job_supervisor: predictions on the test split.
struct EvalResult {
  logits @0 :Data;        # float32[n]
  labels @1 :Data;        # float32[n]
  probs @2 :Data;         # float32[n] (empty when the data has no teacher)
  groups @3 :Data;        # uint64[n] (empty without metrics.group_by)
}
