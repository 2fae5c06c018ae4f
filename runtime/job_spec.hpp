// The job spec: everything one training job needs, from a YAML job file and/or flags.
// The same spec is what `satrap train` runs embedded and what the cluster accepts.
//
// A job file has the sections name, model, data, training, placement and checkpoint; every key is
// listed by job_fields() (and in the README). Unknown keys and bad values are errors naming
// file:line:column, the key and what was expected. Flags given beside --job override the file.
// Threading: plain values and pure functions.
#pragma once

#include "models/data/synthetic.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/dlrm.hpp"
#include "models/embedding/embedding_table.hpp"
#include "models/embedding/pooling.hpp"

#include <caf/error.hpp>

#include <functional>
#include <string>
#include <vector>

namespace satrap {

struct model_spec {
  std::string type = "dlrm";            // dense model (only dlrm so far)
  dlrm_config dlrm;                     // slots and dense_features follow the data section
  pooling pool = pooling::sum;          // how a bag of ids becomes one vector
  dense_optimizer_options dense;        // dense optimizer (synchronous, all-reduced)
  embedding_options embedding;          // sparse optimizer and initialiser; dim follows dlrm.dim
};

struct data_spec {
  std::string source = "synthetic";     // where batches come from (only synthetic so far)
  synthetic_options synthetic;          // the synthetic data set and its hidden teacher
};

struct training_spec {
  int32_t batch_size = 512;             // samples per batch (per trainer)
  int64_t train_batches = 4000;         // training batches in all (split among the trainers)
  int64_t test_batches = 200;           // held-out batches evaluated at the end
  int32_t staleness = 2;                // K: a lookup may miss the gradients of <= K earlier steps
  uint64_t seed = 7;                    // dense model initialisation
  int32_t progress_every = 20;          // steps between progress reports from each trainer
};

struct placement_spec {
  int32_t shards = 2;                   // embedding_shard actors
  int32_t aggregators = 2;              // gradient_aggregator actors
  int32_t loaders = 2;                  // data_loader actors
  int32_t trainers = 1;                 // dense_trainer replicas (data parallel)
  int32_t partitions = 4096;            // virtual partitions that map ids to shards
};

struct checkpoint_spec {
  std::string dir;                      // where checkpoints go (not implemented yet: must be empty)
  int64_t every_steps = 0;              // 0: never
};

struct job_spec {
  std::string name = "satrap-job";
  model_spec model;
  data_spec data;
  training_spec training;
  placement_spec placement;
  checkpoint_spec checkpoint;
};

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
};

const std::vector<job_field>& job_fields();

// Applies a YAML job file on top of `spec`.
caf::error job_spec_load_file(const std::string& path, job_spec& spec);
// Same, from text; `origin` names it in errors.
caf::error job_spec_load_text(const std::string& text, const std::string& origin, job_spec& spec);

// Derives the linked fields (model slots from the data, embedding dim from the model) and checks
// what a single key cannot: call after loading and overriding.
caf::error job_spec_finalize(job_spec& spec);

// The effective spec as YAML, every key listed.
std::string job_spec_to_yaml(const job_spec& spec);

}  // namespace satrap
