// An exported model: a self-contained folder that serving maps at load instead of parsing, and
// the scorer that turns requests into click probabilities with exactly the training forward pass.
//
// Layout of a model folder (every binary file framed as a snapshot file: checksummed trailer,
// written to a temporary name, synced and renamed; models/embedding/snapshot_file.hpp):
//   job.yaml                 the job spec the model was trained with (data settings for predict)
//   dense.bin                float32[param count]: the dense network's flat parameters
//   embeddings-<k>.bin       one file per export shard k, holding the rows of a contiguous range
//                            of virtual partitions [first, last): a header of 8 uint64 (magic
//                            "SATEMB01", dim, precision 0 fp32 / 1 fp16, rows, slots (a power of
//                            two), first partition, last partition, bytes per row), an
//                            open-addressing table of `slots` (id, row number) pairs (row number
//                            ~0: empty; probe from mix64(id), linear), then rows x row-bytes of
//                            weights as trained (fp32 or fp16; no optimizer state)
//   MODEL.json               written last (atomically): format, name, version, network (its
//                            tasks and unpooled sequences included), pooling, initialiser,
//                            partitions, the named features and labels of a job with
//                            data.features, files with sizes and checksums. A folder without it
//                            is an unfinished export and is never loaded.
// Ids that were never trained read as their deterministic initial row (embedding_init_row), as
// an embedding shard's peek does at evaluation; fp16 rows widen exactly as the store reads them.
//
// A fleet: an export shard is a range of virtual partitions, the same unit the training shards
// own, so a server may load a subset of the shard files (exported_model::open's `shards`) and a
// router sends each id lookup to a server holding its partition (see models/README.md).
// Threading: exported_model is immutable after open and shared by every scorer (shared_ptr: the
// files are unmapped when the last holder lets go). A model_scorer has one owner at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "models/data/feature_cross.hpp"
#include "models/data/feature_schema.hpp"
#include "models/dense/model_zoo.hpp"
#include "models/embedding/embedding_options.hpp"
#include "models/embedding/pooling.hpp"
#include "models/embedding/snapshot_file.hpp"
#include "models/result.hpp"

namespace satrap {

constexpr int exported_model_format = 1;

// What an export says about its model (MODEL.json).
struct exported_model_meta {
  std::string name;            // the job's name: the name requests address
  std::string version;         // names the export in every response (default "step-<step>")
  int64_t step = 0;            // training steps behind it
  uint64_t created_ns = 0;     // wall clock at export (orders exports in a watched folder)
  dense_model_config network;  // type and shape of the dense network
  pooling pool = pooling::sum;
  embedding_options embedding;  // dim, init, init_scale, seed and precision matter here
  uint32_t partitions = 4096;   // virtual partitions of the job
  // The job's feature crosses (models/data/feature_cross.hpp): the last crosses.size() of the
  // network's slots are made from the others; a request gives the others only (input_slots).
  feature_crosses crosses;
  // The job's named features (data.features; empty: slots by number) and labels (data.labels;
  // one per task of network.tasks). A model with named features is asked by name: a request's
  // instance is a sample as the job's JSON lines give it (models/serving/predict_request.hpp),
  // its ids hashed by table and pooled per feature as in training.
  feature_schema features;
  std::vector<std::string> labels;
  // The job's ids carry pooling weights by slot (data.value_weights: libsvm / libfm / libffm
  // values): a request gives each id's weight beside it.
  bool value_weights = false;
  std::string job_yaml;  // the job spec, stored as job.yaml
};

// Writes a model folder from the dense parameters and the embedding snapshot `sequence` under
// `snapshot_root` (its chain of incremental parents included), split into `shards` export
// shards by partition range. `out` must not exist or be empty. One export shard at a time is
// restored in memory. Returns the rows written.
result<uint64_t> export_model(const std::string& out, const exported_model_meta& meta,
                              std::span<const float> dense_params, const std::string& snapshot_root,
                              uint64_t sequence, uint32_t shards = 1);

// The partition of an id: must equal runtime/partition_map.hpp's partition_of (tested).
inline uint32_t exported_partition_of(uint64_t id, uint32_t partitions) {
  id ^= id >> 33;
  id *= 0xff51afd7ed558ccdULL;
  id ^= id >> 33;
  return static_cast<uint32_t>((id >> 32) * partitions >> 32);
}

// Reads MODEL.json only (cheap; for watching a folder).
result<exported_model_meta> exported_model_read_meta(const std::string& dir);

// exported_model::open's shards for a model without rows (a fleet's router: the dense network and
// the meta only; the rows are the partition servers').
inline constexpr uint32_t exported_no_shards = ~uint32_t{0};

class exported_model {
 public:
  // Maps the folder's files (checking sizes and checksums against MODEL.json). `shards`: the
  // export shards to hold (empty: all; {exported_no_shards}: none); lookups of ids in other
  // partitions are errors.
  static result<std::shared_ptr<const exported_model>> open(const std::string& dir,
                                                            std::vector<uint32_t> shards = {});

  const exported_model_meta& meta() const { return meta_; }
  const std::string& dir() const { return dir_; }
  std::span<const float> dense_params() const { return dense_; }
  int slots() const { return meta_.network.slots; }  // with the cross slots
  // The slots an instance gives: the data's, before the crosses are added (add_crosses).
  int input_slots() const { return meta_.network.slots - static_cast<int>(meta_.crosses.size()); }
  int dense_features() const { return meta_.network.dense_features; }
  int dim() const { return meta_.embedding.dim; }
  int tasks() const { return meta_.network.tasks; }  // logits per instance
  // Named features (meta().features non-empty): their layout (data slots and dense columns,
  // pooling per data slot, weights, unpooled sequences) and the pooling of each model slot.
  bool named() const { return !meta_.features.empty(); }
  // Whether a score_input must carry weights (named features with weights, or value_weights).
  bool weighted() const { return meta_.value_weights || layout_.weighted; }
  const feature_layout& layout() const { return layout_; }
  // Pooling per model slot (empty: every slot by meta().pool, unweighted).
  const std::vector<pooling>& slot_pool() const { return slot_pool_; }
  uint64_t rows() const { return rows_; }
  uint64_t mapped_bytes() const;
  // Whether this server holds the partition of `id`.
  bool holds(uint64_t id) const;
  // Whether it holds every partition (then every id is held).
  bool holds_all() const { return holds_all_; }
  // The partitions held, as ascending [first, last) ranges.
  std::vector<std::pair<uint32_t, uint32_t>> held_ranges() const;
  // out: dim floats: the trained row, or the initial row of an id never trained. The id's
  // partition must be held (holds).
  void lookup(uint64_t id, float* out) const;

 private:
  struct shard_file {
    mapped_file file;
    const uint64_t* table = nullptr;  // slots x (id, row)
    uint64_t slots = 0;
    const std::byte* weights = nullptr;
    uint64_t row_bytes = 0;
    bool fp16 = false;
  };
  exported_model() = default;
  exported_model_meta meta_;
  feature_layout layout_;
  std::vector<pooling> slot_pool_;
  std::string dir_;
  std::unique_ptr<mapped_file> dense_file_;
  std::span<const float> dense_;
  std::vector<shard_file> files_;
  std::vector<int32_t> owner_;  // partition -> index into files_, -1 when not held
  uint64_t rows_ = 0;
  bool holds_all_ = false;
};

// A batch of instances to score: the `batch` layout (sample-major bags, dense features).
struct score_input {
  int size = 0;
  std::vector<uint32_t> offsets;  // size*slots + 1
  std::vector<uint64_t> ids;
  std::vector<float> weights;  // empty (every id weighs 1), or one pooling weight per id
  std::vector<float> dense;    // size x dense_features
};

// Scores batches with one model: de-duplicates ids, looks up rows, pools them per bag exactly as
// the gradient aggregator does, runs the dense network's forward pass (the trainers' evaluation).
class model_scorer {
 public:
  explicit model_scorer(std::shared_ptr<const exported_model> model);
  // logits[size x tasks], sample-major. The input must fit the model (see check_score_input).
  void score(int size, std::span<const uint32_t> offsets, std::span<const uint64_t> ids,
             std::span<const float> weights, std::span<const float> dense, float* logits);
  void score(const score_input& in, float* logits) {
    score(in.size, in.offsets, in.ids, in.weights, in.dense, logits);
  }
  // The same after the lookup: `rows` holds dim floats for each of dedup.unique, in order (a
  // fleet's router has them from the partition servers). Pools and runs the dense network.
  void score_rows(int size, std::span<const uint32_t> offsets, const dedup_result& dedup,
                  const float* rows, std::span<const float> weights, std::span<const float> dense,
                  float* logits);
  const std::shared_ptr<const exported_model>& model() const { return model_; }

 private:
  std::shared_ptr<const exported_model> model_;
  std::unique_ptr<dense_model> net_;
  std::vector<float> rows_, pooled_;
  std::vector<const float*> row_ptrs_;
};

// "" when the input fits the model (slots, dense features, weights, ids held), else what is
// wrong.
std::string check_score_input(const exported_model& model, int size,
                              std::span<const uint32_t> offsets, std::span<const uint64_t> ids,
                              std::span<const float> weights, std::span<const float> dense);

}  // namespace satrap
