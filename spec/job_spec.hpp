// The job spec: everything one training job needs, from a YAML job file and/or flags.
// The same spec is what `satrap train` runs embedded and what the cluster accepts.
//
// A job file has the sections name, model, data, training, placement, checkpoint, supervision
// and timing; every key is
// listed by job_fields() (and in the README). Unknown keys and bad values are errors naming
// file:line:column, the key and what was expected. Flags given beside --job override the file.
// Threading: plain values and pure functions.
#pragma once

#include "models/data/dataset_cache.hpp"
#include "models/data/feature_cross.hpp"
#include "models/data/file_source.hpp"
#include "models/data/kafka_source.hpp"
#include "models/data/synthetic.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/model_zoo.hpp"
#include "models/embedding/embedding_table.hpp"
#include "models/embedding/pooling.hpp"
#include "models/tier/tier_options.hpp"
#include "spec/knobs.hpp"

#include <caf/error.hpp>

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace satrap {

struct model_spec {
  dense_model_config network;   // type and shape; slots and dense_features follow the data section
  pooling pool = pooling::sum;  // how a bag of ids becomes one vector
  dense_optimizer_options dense;  // dense optimizer (synchronous, all-reduced)
  embedding_options embedding;    // sparse optimizer and initialiser; dim follows network.dim
  tier_options tier;  // model.embedding.tier: the SSD tier under each shard (models/tier/)
  std::string file;   // model.type torchscript: the module's file (its bytes: network.torchscript)
};

// Where a job's batches come from: the synthetic teacher, or files of one format.
enum class data_source {
  synthetic,
  criteo,
  libsvm,
  libfm,
  libffm,
  jsonl,
  tfrecord,  // tf.train.Example records (models/data/tfrecord_format.hpp)
  kafka      // a Kafka stream (models/data/kafka_source.hpp), messages in data.kafka.format
};  // libfm = libsvm's format

// The key's text ("synthetic", "criteo", ...), for messages.
const char* data_source_name(data_source s);

struct data_spec {
  data_source source = data_source::synthetic;
  synthetic_options synthetic;  // the synthetic data set and its hidden teacher
  // File data (see models/data/dataset_cache.hpp and file_source.hpp). Paths (files, cache_dir)
  // from a job file are made absolute against its folder; from flags, relative to the working one.
  std::vector<std::string> train_files;  // paths or globs of the training data
  std::vector<std::string> test_files;   // paths or globs; empty: hold out reading.test_fraction
  std::vector<std::string> validation_files;  // paths or globs; empty: reading.validation_fraction
  // slots and field_starts; jsonl: the named features (data.features) and the label's name
  // (data.labels); the format follows `source`
  text_format_options format;
  // data.labels: the labels' names, one task each (jsonl: keys of each line; synthetic: one, or
  // two for the click-and-purchase teacher; other formats: their one label)
  std::vector<std::string> labels{"label"};
  on_error_policy on_error =
    on_error_policy::fail;         // a bad line stops the job, or is skipped and counted
  file_source_options reading;     // shuffle, shuffle window, shuffle seed, held-out fraction
  uint32_t chunk_samples = 65536;  // samples per cache chunk file
  std::string cache_dir;           // where converted data sets go; "": $TMPDIR/satrap-cache
  int64_t cache_max_mib = 20480;   // the cache folder's size cap (LRU data sets go); 0: none
  // Feature crosses (models/data/feature_cross.hpp): each adds a sparse slot after the data's own,
  // whose ids hash the crossed slots' ids; applied to every batch of every split, and by serving.
  feature_crosses crosses;
  // data.source kafka (models/data/kafka_source.hpp): data.kafka.* (brokers, topics, group,
  // start, end, config) and the messages' format (data.kafka.format: jsonl, tfrecord or criteo).
  kafka_options kafka;
  text_format kafka_format = text_format::jsonl;
};

// Where the dense network runs: on the CPU (BLAS), or on a CUDA device (models/cuda/; DLRM only).
enum class dense_device { cpu, cuda };

// Early stopping on the validation split: stop after `patience` evaluations without an
// improvement of at least min_delta, then restore the best evaluated model for the test.
enum class stop_metric { auc, logloss };
struct early_stopping_spec {
  stop_metric metric = stop_metric::auc;
  int32_t patience = 0;    // evaluations without improvement; 0: off
  double min_delta = 0.0;  // the smallest change that counts as an improvement
};

struct training_spec {
  int32_t batch_size = 512;      // samples per batch (per trainer)
  int64_t train_batches = 4000;  // training batches in all (split among the trainers)
  int64_t test_batches = 200;    // held-out batches evaluated at the end (file data: at most all)
  int32_t epochs = 1;            // file data with train_batches 0: passes over the training split
  int32_t staleness = 2;         // K: a lookup may miss the gradients of <= K earlier steps
  dense_device device = dense_device::cpu;  // where the dense trainers compute
  uint64_t seed = 7;                        // dense model initialisation
  int32_t progress_every = 20;              // steps between progress reports from each trainer
  int32_t blas_threads = 0;         // OpenBLAS threads per CPU trainer; 0: auto (blas_threads.hpp)
  std::vector<float> task_weights;  // one loss weight per label (data.labels); empty: all 1
  // Validation while training (needs a validation split: data.validation_files or
  // data.validation_fraction, or synthetic data with validation_batches > 0).
  int64_t eval_every = 0;          // steps (per trainer) between evaluations; 0: each epoch
  int64_t validation_batches = 0;  // file data: at most this many (0: all); synthetic: the stream
  early_stopping_spec early_stopping;
  double target_auc = 0.0;   // stop once validation AUC reaches it; 0: off
  std::string history_file;  // validation history as JSON lines; "": none
};

// Evaluation metrics.
struct metrics_spec {
  int32_t group_by = -1;  // slot whose id groups the grouped AUC (e.g. the user); -1: none
};

struct placement_spec {
  int32_t shards = 2;               // embedding_shard actors
  int32_t aggregators = 2;          // gradient_aggregator actors
  int32_t loaders = 2;              // data_loader actors
  int32_t trainers = 1;             // dense_trainer replicas (data parallel)
  int32_t partitions = 4096;        // virtual partitions that map ids to shards
  uint64_t embedding_rows = 0;      // rows the tables will hold, for sizing; 0: slots x vocab
  std::string shard_selector;       // labels a node needs to take shards, "k=v,k2=v2"
  std::string aggregator_selector;  // ... to take aggregators
  std::string loader_selector;      // ... to take loaders
  std::string trainer_selector;     // ... to take trainers
};

// Consistent checkpoints (see models/checkpoint/job_checkpoint.hpp). The directory must be on
// storage every node of the job sees (shards write their own files).
struct checkpoint_spec {
  std::string dir;            // where checkpoints go; "": none (a restart begins at step 0)
  int64_t every_steps = 0;    // steps (per trainer) between checkpoints; 0: never
  int32_t every_seconds = 0;  // seconds between checkpoints; 0: never
  int32_t full_every = 5;     // every Nth checkpoint is full, the others incremental
  int32_t keep = 3;           // complete checkpoints kept (and what their chains need); 0: all
  std::string resume_from;    // a checkpoint directory to continue from (its newest one)
};

// Restart intensity, as in Erlang/OTP: past max_restarts within window_s seconds the job fails.
struct supervision_spec {
  int32_t max_restarts = 3;  // restarts of the job's actors allowed within the window
  int32_t window_s = 600;    // the window, in seconds
};

struct job_spec {
  std::string name = "satrap-job";
  model_spec model;
  data_spec data;
  training_spec training;
  placement_spec placement;
  checkpoint_spec checkpoint;
  supervision_spec supervision;
  metrics_spec metrics;
  job_timing timing;  // timeouts and intervals (spec/knobs.hpp)
  // The keys a file or a flag set (every job_field's `set` records its key). job_spec_finalize
  // reads it for the defaults that depend on other keys: the default job's DLRM settings (a
  // linear top over dot_cat, the dense weight average) give way for the other model types and
  // for training.device cuda unless the key was set.
  std::set<std::string> keys_set;
};

// Whether the job evaluates a validation split while it trains.
bool job_has_validation(const job_spec& spec);

// The defaults of `satrap train`: the tuned defaults of the reference run.
job_spec job_spec_defaults();

// One settable key. `set` parses text (a YAML scalar, or a comma-joined YAML sequence, or a flag's
// value) and returns "" or what was expected.
struct job_field {
  std::string key;   // dotted path, e.g. "training.staleness"
  std::string flag;  // command-line flag without dashes, or "" when only the file sets it
  std::string help;
  std::function<std::string(job_spec&, const std::string&)> set;
  std::function<std::string(const job_spec&)> get;
  bool list = false;  // a YAML sequence; its text form is "a,b" (or "[a,b]")
  // A YAML sequence of sequences; its text form is "[a,b],[c,d]" (or "[[a,b],[c,d]]"), and its
  // flag repeats, one inner list "a,b" per use.
  bool nested = false;
  // A YAML value of any shape (data.features: a list of maps); its text form is the value as
  // flow YAML, and `set`'s answer is a whole message (naming the feature) rather than what was
  // expected.
  bool yaml = false;
};

const std::vector<job_field>& job_fields();

// Applies a YAML job file on top of `spec`.
caf::error job_spec_load_file(const std::string& path, job_spec& spec);
// Same, from text; `origin` names it in errors.
caf::error job_spec_load_text(const std::string& text, const std::string& origin, job_spec& spec);

// The largest message one batch may need (ids, pooled embeddings, their gradients): half of
// Cap'n Proto's 512 MiB blob limit and of the default frame limit. job_spec_finalize refuses a
// batch_size past it.
inline constexpr uint64_t batch_message_max_bytes = uint64_t{256} << 20;

// Derives the linked fields (model slots from the data, embedding dim from the model) and checks
// what a single key cannot: call after loading and overriding.
caf::error job_spec_finalize(job_spec& spec);

// Sparse slots per sample of the data section (after job_spec_finalize): the data's own
// (job_data_input_slots, synthetic data's history included) and then one per feature cross;
// job_data_slots counts what the model sees: both, with each unpooled sequence's slot replaced by
// its positions (job_data_sequences).
int job_data_input_slots(const data_spec& data);
int job_data_slots(const data_spec& data);
// The data's unpooled sequences (data.features' pooling: none, or data.synthetic.history with
// history_pooling none), by their data slots; empty when none.
unpooled_sequences job_data_sequences(const data_spec& data);
// Synthetic data: ids per slot per sample, the mean over slots (data.synthetic.bag_sizes or
// ids_per_sample).
double job_synthetic_ids_per_slot(const data_spec& data);
int job_data_dense_features(const data_spec& data);
// The pooling of each of the model's slots when the data has named features (data.features: a
// feature's own pooling, else model.pooling; each position of an unpooled sequence: sum) or a
// synthetic history; empty without them (every slot pools by model.pooling).
std::vector<pooling> job_slot_pooling(const job_spec& spec);

// The effective spec as YAML, every key listed; strings quoted as YAML needs. It is also the
// form in which a spec crosses the wire.
std::string job_spec_to_yaml(const job_spec& spec);

// A spec received from another process (job_spec_to_yaml's text): loaded, finalized, and checked
// to read back as the very text that was sent, so that a job never runs as another job.
caf::expected<job_spec> job_spec_from_wire(const std::string& yaml, const std::string& origin);

}  // namespace satrap
