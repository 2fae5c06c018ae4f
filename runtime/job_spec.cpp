#include "runtime/job_spec.hpp"

#include "models/reference_trainer.hpp"
#include "runtime/error.hpp"
#include "runtime/text_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

namespace satrap {

job_spec job_spec_defaults() {
  job_spec s;
  reference_options ref;
  s.model.network = ref.model;
  s.model.pool = ref.pool;
  s.model.dense = ref.dense;
  s.model.embedding = ref.embedding;
  s.training.batch_size = ref.batch_size;
  s.training.train_batches = ref.train_batches;
  s.training.test_batches = ref.test_batches;
  s.training.seed = ref.seed;
  return s;
}

namespace {

// ---- value parsers: "" on success, else what was expected -----------------------------------

template <class T>
std::string parse_int(const std::string& text, T& out, T lo, T hi) {
  T v{};
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size() || v < lo || v > hi)
    return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  out = v;
  return "";
}

template <class T>
std::string parse_real(const std::string& text, T& out, double lo, double hi) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::ostringstream want;
  want << "a number in [" << lo << ", " << hi << "]";
  if (text.empty() || end != text.c_str() + text.size() || !(v >= lo && v <= hi))
    return want.str();
  out = static_cast<T>(v);
  return "";
}

std::string parse_sizes(const std::string& text, std::vector<int>& out) {
  std::vector<int> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int x = 0;
    if (!parse_int(item, x, 1, 1 << 16).empty())
      return "a list of layer sizes in [1, 65536], e.g. [64, 32]";
    v.push_back(x);
  }
  out = std::move(v);
  return "";
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty())
      v.push_back(item);
  return v;
}

// "[a,b]" (built with append: g++ 12 warns falsely on chains of operator+).
std::string show_list(const std::vector<std::string>& v, const char* separator = ",") {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s.append(i ? separator : "").append(v[i]);
  s.push_back(']');
  return s;
}

std::string parse_ids(const std::string& text, std::vector<int64_t>& out) {
  std::vector<int64_t> v;
  for (auto& item : split_list(text)) {
    int64_t x = 0;
    if (!parse_int(item, x, int64_t{0}, int64_t{1} << 62).empty())
      return "a list of feature ids in [0, 2^62], e.g. [0, 957, 5039]";
    v.push_back(x);
  }
  out = std::move(v);
  return "";
}

template <class E>
std::string parse_enum(const std::string& text, E& out,
                       std::initializer_list<std::pair<const char*, E>> choices) {
  std::string want = "one of";
  for (auto& [name, value] : choices) {
    if (text == name) {
      out = value;
      return "";
    }
    want += std::string(" ") + name;
  }
  return want;
}

template <class E>
std::string show_enum(E value, std::initializer_list<std::pair<const char*, E>> choices) {
  for (auto& [name, v] : choices)
    if (v == value)
      return name;
  return "?";
}

std::string show_sizes(const std::vector<int>& v) {
  std::ostringstream os;  // (string concatenation here trips a false -Wstringop-overflow in g++ 12)
  for (size_t i = 0; i < v.size(); ++i)
    os << (i ? "," : "") << v[i];
  return os.str();
}

template <class T>
std::string show(T x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

#define SATRAP_INT_FIELD(KEY, FLAG, HELP, MEMBER, LO, HI)                                        \
  job_field {                                                                                    \
    KEY, FLAG, HELP,                                                                             \
      [](job_spec& s, const std::string& t) {                                                    \
        return parse_int<decltype(s.MEMBER)>(t, s.MEMBER, LO, HI);                               \
      },                                                                                         \
      [](const job_spec& s) { return std::to_string(s.MEMBER); }                                \
  }
#define SATRAP_REAL_FIELD(KEY, FLAG, HELP, MEMBER, LO, HI)                                       \
  job_field {                                                                                    \
    KEY, FLAG, HELP,                                                                             \
      [](job_spec& s, const std::string& t) { return parse_real(t, s.MEMBER, LO, HI); },        \
      [](const job_spec& s) { return show(s.MEMBER); }                                          \
  }
#define SATRAP_ENUM_FIELD(KEY, FLAG, HELP, MEMBER, ...)                                          \
  job_field {                                                                                    \
    KEY, FLAG, HELP,                                                                             \
      [](job_spec& s, const std::string& t) { return parse_enum(t, s.MEMBER, {__VA_ARGS__}); },  \
      [](const job_spec& s) { return show_enum(s.MEMBER, {__VA_ARGS__}); }                       \
  }
#define SATRAP_STRING_FIELD(KEY, FLAG, HELP, MEMBER)                                             \
  job_field {                                                                                    \
    KEY, FLAG, HELP,                                                                             \
      [](job_spec& s, const std::string& t) {                                                    \
        s.MEMBER = t;                                                                            \
        return std::string{};                                                                    \
      },                                                                                         \
      [](const job_spec& s) { return s.MEMBER; }                                                \
  }
#define SATRAP_LIST_FIELD(KEY, FLAG, HELP, MEMBER)                                               \
  job_field {                                                                                    \
    KEY, FLAG, HELP,                                                                             \
      [](job_spec& s, const std::string& t) {                                                    \
        s.MEMBER = split_list(t);                                                                \
        return std::string{};                                                                    \
      },                                                                                         \
      [](const job_spec& s) { return show_list(s.MEMBER); }, true                               \
  }
#define SATRAP_SIZES_FIELD(KEY, FLAG, HELP, MEMBER)                                              \
  job_field {                                                                                    \
    KEY, FLAG, HELP, [](job_spec& s, const std::string& t) { return parse_sizes(t, s.MEMBER); }, \
      [](const job_spec& s) { return show_sizes(s.MEMBER); }, true                              \
  }

using dok = dense_optimizer_kind;
using sok = sparse_optimizer_kind;
using lsk = lr_schedule_kind;
constexpr int32_t i32max = std::numeric_limits<int32_t>::max();
constexpr int64_t i64max = std::numeric_limits<int64_t>::max();
constexpr uint64_t u64max = std::numeric_limits<uint64_t>::max();

std::vector<job_field> make_fields() {
  return {
    SATRAP_STRING_FIELD("name", "name", "job name", name),
    SATRAP_ENUM_FIELD("model.type", "model", "dense model", model.network.type,
                      {"dlrm", dense_model_type::dlrm}, {"dcn_v2", dense_model_type::dcn_v2},
                      {"deepfm", dense_model_type::deepfm}, {"wide_deep", dense_model_type::wide_deep}),
    SATRAP_INT_FIELD("model.dim", "dim", "embedding size (= bottom MLP output)", model.network.dim, 1, 4096),
    SATRAP_SIZES_FIELD("model.bottom", "bottom", "bottom MLP hidden sizes", model.network.bottom),
    SATRAP_SIZES_FIELD("model.top", "top", "top (deep) MLP hidden sizes", model.network.top),
    SATRAP_ENUM_FIELD("model.interaction", "interaction",
                      "dlrm: dot, cat (raw embeddings to the top MLP) or dot_cat", model.network.interaction,
                      {"dot", dlrm_interaction::dot}, {"cat", dlrm_interaction::cat},
                      {"dot_cat", dlrm_interaction::dot_cat}),
    SATRAP_REAL_FIELD("model.dropout", "dropout", "dlrm: dropout on the top MLP's hidden layers (training only)",
                      model.network.dropout, 0.0, 0.9),
    SATRAP_ENUM_FIELD("model.precision", "precision",
                      "GEMM precision: fp32, or bf16 / fp16 with fp32 master weights (training.device cuda only)",
                      model.network.precision, {"fp32", dense_precision::fp32},
                      {"bf16", dense_precision::bf16}, {"fp16", dense_precision::fp16}),
    SATRAP_INT_FIELD("model.cross_layers", "cross-layers", "dcn_v2: cross layers", model.network.cross_layers, 0, 64),
    SATRAP_ENUM_FIELD("model.pooling", "pooling", "bag pooling", model.pool,
                      {"sum", pooling::sum}, {"mean", pooling::mean}),
    SATRAP_ENUM_FIELD("model.dense_optimizer.kind", "dense-optimizer", "dense optimizer",
                      model.dense.kind, {"sgd", dok::sgd}, {"adagrad", dok::adagrad}, {"adam", dok::adam}),
    SATRAP_REAL_FIELD("model.dense_optimizer.learning_rate", "dense-lr", "dense learning rate",
                      model.dense.learning_rate, 0.0, 100.0),
    SATRAP_ENUM_FIELD("model.dense_optimizer.schedule.kind", "dense-schedule", "dense learning-rate schedule",
                      model.dense.schedule.kind, {"constant", lsk::constant}, {"warmup", lsk::warmup},
                      {"step", lsk::step}, {"exponential", lsk::exponential}, {"cosine", lsk::cosine},
                      {"inverse_sqrt", lsk::inverse_sqrt}),
    SATRAP_INT_FIELD("model.dense_optimizer.schedule.warmup_steps", "", "linear warm-up steps (any kind)",
                     model.dense.schedule.warmup_steps, int64_t{0}, i64max),
    SATRAP_INT_FIELD("model.dense_optimizer.schedule.decay_steps", "", "step/exponential: period; cosine: length",
                     model.dense.schedule.decay_steps, int64_t{0}, i64max),
    SATRAP_REAL_FIELD("model.dense_optimizer.schedule.decay_rate", "", "step/exponential: factor per period",
                      model.dense.schedule.decay_rate, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.dense_optimizer.schedule.min_factor", "", "cosine: floor, fraction of the base rate",
                      model.dense.schedule.min_factor, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.dense_optimizer.weight_decay", "", "dense L2 coefficient",
                      model.dense.weight_decay, 0.0, 100.0),
    SATRAP_REAL_FIELD("model.dense_optimizer.eps", "", "dense optimizer denominator guard",
                      model.dense.eps, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.dense_optimizer.beta1", "", "Adam first-moment decay",
                      model.dense.beta1, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.dense_optimizer.beta2", "", "Adam second-moment decay",
                      model.dense.beta2, 0.0, 1.0),
    SATRAP_ENUM_FIELD("model.embedding.optimizer", "embedding-optimizer", "sparse optimizer",
                      model.embedding.optimizer, {"sgd", sok::sgd}, {"adagrad", sok::adagrad},
                      {"rowwise_adagrad", sok::rowwise_adagrad}, {"adam", sok::adam}, {"ftrl", sok::ftrl}),
    SATRAP_REAL_FIELD("model.embedding.learning_rate", "embedding-lr", "sparse learning rate",
                      model.embedding.learning_rate, 0.0, 100.0),
    SATRAP_ENUM_FIELD("model.embedding.schedule.kind", "embedding-schedule", "sparse learning-rate schedule",
                      model.embedding.schedule.kind, {"constant", lsk::constant}, {"warmup", lsk::warmup},
                      {"step", lsk::step}, {"exponential", lsk::exponential}, {"cosine", lsk::cosine},
                      {"inverse_sqrt", lsk::inverse_sqrt}),
    SATRAP_INT_FIELD("model.embedding.schedule.warmup_steps", "", "linear warm-up steps (any kind)",
                     model.embedding.schedule.warmup_steps, int64_t{0}, i64max),
    SATRAP_INT_FIELD("model.embedding.schedule.decay_steps", "", "step/exponential: period; cosine: length",
                     model.embedding.schedule.decay_steps, int64_t{0}, i64max),
    SATRAP_REAL_FIELD("model.embedding.schedule.decay_rate", "", "step/exponential: factor per period",
                      model.embedding.schedule.decay_rate, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.embedding.schedule.min_factor", "", "cosine: floor, fraction of the base rate",
                      model.embedding.schedule.min_factor, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.embedding.initial_accumulator", "", "Adagrad / FTRL accumulator start",
                      model.embedding.initial_accumulator, 0.0, 100.0),
    SATRAP_REAL_FIELD("model.embedding.eps", "", "Adagrad / Adam denominator guard",
                      model.embedding.eps, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.embedding.init_scale", "", "rows start uniform(-s, s) or normal(0, s)",
                      model.embedding.init_scale, 0.0, 10.0),
    SATRAP_ENUM_FIELD("model.embedding.init", "", "initial rows (deterministic per id)",
                      model.embedding.init, {"uniform", embedding_init_kind::uniform},
                      {"normal", embedding_init_kind::normal}, {"zeros", embedding_init_kind::zeros}),
    SATRAP_REAL_FIELD("model.embedding.beta1", "", "sparse Adam first-moment decay",
                      model.embedding.beta1, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.embedding.beta2", "", "sparse Adam second-moment decay",
                      model.embedding.beta2, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.embedding.ftrl_beta", "", "FTRL-Proximal beta",
                      model.embedding.ftrl_beta, 0.0, 100.0),
    SATRAP_REAL_FIELD("model.embedding.ftrl_l1", "", "FTRL-Proximal L1 strength",
                      model.embedding.ftrl_l1, 0.0, 100.0),
    SATRAP_REAL_FIELD("model.embedding.ftrl_l2", "", "FTRL-Proximal L2 strength",
                      model.embedding.ftrl_l2, 0.0, 100.0),
    SATRAP_REAL_FIELD("model.embedding.weight_decay", "", "sparse L2: g += weight_decay * w",
                      model.embedding.weight_decay, 0.0, 100.0),
    SATRAP_REAL_FIELD("model.embedding.clip", "", "weights clamped to [-clip, clip]; 0 = off",
                      model.embedding.clip, 0.0, 1e30),
    SATRAP_ENUM_FIELD("model.embedding.precision", "", "stored weights (optimizer state is fp32)",
                      model.embedding.precision, {"fp32", weight_precision::fp32},
                      {"fp16", weight_precision::fp16}),
    SATRAP_INT_FIELD("model.embedding.capacity", "", "rows per shard at most; 0 = unbounded",
                     model.embedding.capacity, uint64_t{0}, uint64_t{4000000000}),
    SATRAP_ENUM_FIELD("model.embedding.eviction", "", "a full shard: evict (clock) or admit nothing (none)",
                      model.embedding.eviction, {"clock", eviction_kind::clock}, {"none", eviction_kind::none}),
    SATRAP_ENUM_FIELD("model.embedding.admission", "", "which unseen ids get a row",
                      model.embedding.admission, {"all", admission_kind::all},
                      {"probability", admission_kind::probability}, {"count_min", admission_kind::count_min}),
    SATRAP_REAL_FIELD("model.embedding.admit_probability", "", "admission=probability: chance per sighting",
                      model.embedding.admit_probability, 0.0, 1.0),
    SATRAP_INT_FIELD("model.embedding.admit_after", "", "admission=count_min: sightings before a row",
                     model.embedding.admit_after, uint32_t{1}, uint32_t{65535}),
    SATRAP_INT_FIELD("model.embedding.sketch_width", "", "count-min sketch counters per row",
                     model.embedding.sketch_width, uint32_t{1}, uint32_t{1} << 30),
    SATRAP_INT_FIELD("model.embedding.sketch_depth", "", "count-min sketch rows",
                     model.embedding.sketch_depth, uint32_t{1}, uint32_t{16}),
    SATRAP_ENUM_FIELD("model.embedding.simd", "", "store kernels: auto (AVX2 when present) or scalar",
                      model.embedding.simd, {"auto", simd_choice::automatic}, {"scalar", simd_choice::scalar}),
    SATRAP_ENUM_FIELD("data.source", "source", "where batches come from", data.source,
                      {"synthetic", data_source::synthetic}, {"criteo", data_source::criteo},
                      {"libsvm", data_source::libsvm}, {"libfm", data_source::libfm},
                      {"libffm", data_source::libffm}),
    SATRAP_LIST_FIELD("data.train_files", "train-files", "training data files (paths or globs)",
                      data.train_files),
    SATRAP_LIST_FIELD("data.test_files", "test-files", "test data files; none: hold out data.test_fraction",
                      data.test_files),
    SATRAP_LIST_FIELD("data.validation_files", "validation-files",
                      "validation data files (model choice, never trained on); none: data.validation_fraction",
                      data.validation_files),
    SATRAP_REAL_FIELD("data.validation_fraction", "validation-fraction",
                      "without validation files: this fraction of training rows (by a hash of row and data.seed) validates",
                      data.reading.validation_fraction, 0.0, 0.9),
    SATRAP_REAL_FIELD("data.test_fraction", "", "without test files: the tail of the training data held out",
                      data.reading.test_fraction, 0.0, 0.99),
    SATRAP_INT_FIELD("data.slots", "", "libsvm by position / libffm: sparse slots per sample",
                     data.format.slots, 0, 1024),
    job_field{"data.field_starts", "", "libsvm / libfm: first feature id of each slot",
              [](job_spec& s, const std::string& t) { return parse_ids(t, s.data.format.field_starts); },
              [](const job_spec& s) {
                std::vector<std::string> ids;
                for (auto id : s.data.format.field_starts)
                  ids.push_back(std::to_string(id));
                return show_list(ids, ", ");
              },
              true},
    SATRAP_ENUM_FIELD("data.on_error", "on-error", "a bad input line", data.on_error,
                      {"fail", on_error_policy::fail}, {"skip", on_error_policy::skip}),
    SATRAP_ENUM_FIELD("data.shuffle", "", "reshuffle the training data every epoch",
                      data.reading.shuffle, {"true", true}, {"false", false}),
    SATRAP_INT_FIELD("data.shuffle_window", "", "samples per shuffle window",
                     data.reading.shuffle_window, int64_t{1}, i64max),
    SATRAP_INT_FIELD("data.seed", "", "shuffle seed", data.reading.seed, uint64_t{0}, u64max),
    SATRAP_INT_FIELD("data.chunk_samples", "", "samples per cache chunk file", data.chunk_samples,
                     uint32_t{1}, uint32_t{1} << 24),
    SATRAP_STRING_FIELD("data.cache_dir", "", "converted data sets; \"\": $TMPDIR/satrap-cache",
                        data.cache_dir),
    SATRAP_INT_FIELD("data.cache_max_mib", "cache-max-mib",
                     "size cap of data.cache_dir: least recently used data sets beyond it are "
                     "deleted (never the job's own; 0: no cap)", data.cache_max_mib, int64_t{0}, i64max),
    SATRAP_INT_FIELD("data.synthetic.slots", "slots", "sparse slots per sample", data.synthetic.slots, 1, 1024),
    SATRAP_INT_FIELD("data.synthetic.vocab", "vocab", "distinct ids per slot", data.synthetic.vocab,
                     uint64_t{1}, uint64_t{1} << 40),
    SATRAP_REAL_FIELD("data.synthetic.zipf_exponent", "zipf", "id popularity exponent",
                      data.synthetic.zipf_exponent, 0.0, 10.0),
    SATRAP_INT_FIELD("data.synthetic.ids_per_sample", "ids-per-sample", "ids per slot per sample",
                     data.synthetic.ids_per_sample, 1, 1024),
    SATRAP_INT_FIELD("data.synthetic.dense_features", "dense-features", "dense features per sample",
                     data.synthetic.dense_features, 1, 4096),
    SATRAP_INT_FIELD("data.synthetic.seed", "data-seed", "data and teacher seed", data.synthetic.seed,
                     uint64_t{0}, u64max),
    SATRAP_REAL_FIELD("data.synthetic.teacher_bias", "", "teacher base logit",
                      data.synthetic.teacher_bias, -20.0, 20.0),
    SATRAP_REAL_FIELD("data.synthetic.teacher_id_std", "", "std of the per-id effects",
                      data.synthetic.teacher_id_std, 0.0, 20.0),
    SATRAP_INT_FIELD("data.synthetic.teacher_latent_dim", "", "teacher latent size",
                     data.synthetic.teacher_latent_dim, 1, 1024),
    SATRAP_REAL_FIELD("data.synthetic.teacher_pair_std", "", "std of the pairwise effects",
                      data.synthetic.teacher_pair_std, 0.0, 20.0),
    SATRAP_REAL_FIELD("data.synthetic.teacher_dense_std", "", "std of the dense effects",
                      data.synthetic.teacher_dense_std, 0.0, 20.0),
    SATRAP_INT_FIELD("training.batch_size", "batch-size", "samples per batch (per trainer)",
                     training.batch_size, 1, 1 << 20),
    SATRAP_INT_FIELD("training.train_batches", "train-batches", "training batches in all",
                     training.train_batches, int64_t{0}, i64max),
    SATRAP_INT_FIELD("training.test_batches", "test-batches", "held-out batches (0: the whole test split of file data)",
                     training.test_batches, int64_t{0}, i64max),
    SATRAP_INT_FIELD("training.epochs", "epochs", "file data with train_batches 0: passes over the data",
                     training.epochs, 1, 1 << 20),
    SATRAP_INT_FIELD("training.staleness", "staleness", "K: max missed embedding steps (0 = sync)",
                     training.staleness, 0, 1024),
    SATRAP_ENUM_FIELD("training.device", "device", "where the dense trainers compute",
                      training.device, {"cpu", dense_device::cpu}, {"cuda", dense_device::cuda}),
    SATRAP_INT_FIELD("training.seed", "seed", "dense model seed", training.seed, uint64_t{0}, u64max),
    SATRAP_INT_FIELD("training.progress_every", "", "steps between progress reports",
                     training.progress_every, 1, i32max),
    SATRAP_INT_FIELD("training.eval_every", "eval-every",
                     "steps between validation evaluations (0: each epoch; synthetic: at the end)",
                     training.eval_every, int64_t{0}, i64max),
    SATRAP_INT_FIELD("training.validation_batches", "validation-batches",
                     "file data: validation batches at most (0: all); synthetic: the validation stream (0: none)",
                     training.validation_batches, int64_t{0}, i64max),
    SATRAP_ENUM_FIELD("training.early_stopping.metric", "early-stopping-metric",
                      "early stopping: the validation metric", training.early_stopping.metric,
                      {"auc", stop_metric::auc}, {"logloss", stop_metric::logloss}),
    SATRAP_INT_FIELD("training.early_stopping.patience", "early-stopping-patience",
                     "stop after this many evaluations without improvement, restore the best model (0: off)",
                     training.early_stopping.patience, 0, i32max),
    SATRAP_REAL_FIELD("training.early_stopping.min_delta", "",
                      "early stopping: the smallest improvement that counts", training.early_stopping.min_delta,
                      0.0, 1.0),
    SATRAP_REAL_FIELD("training.target_auc", "target-auc",
                      "stop once validation AUC reaches this (0: off)", training.target_auc, 0.0, 1.0),
    SATRAP_STRING_FIELD("training.history_file", "history-file",
                        "validation history as JSON lines (\"\": none)", training.history_file),
    SATRAP_INT_FIELD("metrics.group_by", "group-by",
                     "slot whose first id groups the grouped AUC, e.g. the user (-1: none)",
                     metrics.group_by, -1, 1023),
    SATRAP_INT_FIELD("placement.shards", "shards", "embedding shards", placement.shards, 1, 4096),
    SATRAP_INT_FIELD("placement.aggregators", "aggregators", "gradient aggregators",
                     placement.aggregators, 1, 4096),
    SATRAP_INT_FIELD("placement.loaders", "loaders", "data loaders", placement.loaders, 1, 4096),
    SATRAP_INT_FIELD("placement.trainers", "trainers", "dense trainer replicas", placement.trainers, 1, 1024),
    SATRAP_INT_FIELD("placement.partitions", "partitions", "virtual partitions",
                     placement.partitions, 1, 1 << 24),
    SATRAP_INT_FIELD("placement.embedding_rows", "", "rows the tables will hold (0: slots x vocab)",
                     placement.embedding_rows, uint64_t{0}, u64max),
    SATRAP_STRING_FIELD("placement.shard_selector", "", "node labels for shards, k=v,...",
                        placement.shard_selector),
    SATRAP_STRING_FIELD("placement.aggregator_selector", "", "node labels for aggregators",
                        placement.aggregator_selector),
    SATRAP_STRING_FIELD("placement.loader_selector", "", "node labels for loaders",
                        placement.loader_selector),
    SATRAP_STRING_FIELD("placement.trainer_selector", "", "node labels for trainers",
                        placement.trainer_selector),
    SATRAP_STRING_FIELD("checkpoint.dir", "checkpoint-dir",
                        "checkpoint directory, on storage every node sees (\"\": none)",
                        checkpoint.dir),
    SATRAP_INT_FIELD("checkpoint.every_steps", "checkpoint-every",
                     "steps between checkpoints (0: never)", checkpoint.every_steps, int64_t{0},
                     i64max),
    SATRAP_INT_FIELD("checkpoint.every_seconds", "", "seconds between checkpoints (0: never)",
                     checkpoint.every_seconds, 0, i32max),
    SATRAP_INT_FIELD("checkpoint.full_every", "", "every Nth checkpoint is full, others incremental",
                     checkpoint.full_every, 1, i32max),
    SATRAP_INT_FIELD("checkpoint.keep", "checkpoint-keep",
                     "complete checkpoints kept (older ones deleted, but never one the kept "
                     "ones' incremental chains need; 0: keep all)", checkpoint.keep, 0, i32max),
    SATRAP_STRING_FIELD("checkpoint.resume_from", "resume",
                        "continue from the newest checkpoint in this directory",
                        checkpoint.resume_from),
    SATRAP_INT_FIELD("supervision.max_restarts", "max-restarts",
                     "restarts allowed within supervision.window_s; past it the job fails",
                     supervision.max_restarts, 0, 1000),
    SATRAP_INT_FIELD("supervision.window_s", "", "restart intensity window, seconds",
                     supervision.window_s, 1, i32max),
    // Timeouts and intervals (runtime/knobs.hpp says what each is for), milliseconds.
    SATRAP_INT_FIELD("timing.spawn_timeout_ms", "", "a node agent spawning one actor, ms",
                     timing.spawn_timeout_ms, int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.trainer_request_timeout_ms", "",
                     "a trainer's request to a loader or an aggregator, ms",
                     timing.trainer_request_timeout_ms, int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.shard_request_timeout_ms", "", "an aggregator's request to a shard, ms",
                     timing.shard_request_timeout_ms, int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.restore_timeout_ms", "", "a shard restoring from a checkpoint, ms",
                     timing.restore_timeout_ms, int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.dense_restore_timeout_ms", "",
                     "a trainer restoring its dense state from a checkpoint, ms",
                     timing.dense_restore_timeout_ms, int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.snapshot_timeout_ms", "", "a shard writing its checkpoint file, ms",
                     timing.snapshot_timeout_ms, int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.hold_timeout_ms", "", "a trainer holding for a checkpoint cut, ms",
                     timing.hold_timeout_ms, int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.validation_timeout_ms", "",
                     "a trainer evaluating its share of the validation split, ms",
                     timing.validation_timeout_ms, int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.stats_timeout_ms", "", "a shard's statistics at the end, ms",
                     timing.stats_timeout_ms, int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.directory_timeout_ms", "", "the head listing live nodes, ms",
                     timing.directory_timeout_ms, int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.replan_delay_ms", "",
                     "pause after a failure before re-placing the job, ms",
                     timing.replan_delay_ms, int64_t{0}, i64max),
  };
}

const job_field* find_field(const std::string& key) {
  for (auto& f : job_fields())
    if (f.key == key)
      return &f;
  return nullptr;
}

std::string where(const std::string& origin, const YAML::Mark& m) {
  return origin + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

caf::error load_node(const YAML::Node& node, const std::string& prefix, const std::string& origin,
                     job_spec& spec) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    auto name = YAML::Node(it->first).as<std::string>();
    auto key = prefix.empty() ? name : prefix + "." + name;
    YAML::Node value = it->second;
    YAML::Node key_node = it->first;
    auto* field = find_field(key);
    if (value.IsMap() && !field) {
      if (auto err = load_node(value, key, origin, spec))
        return err;
      continue;
    }
    if (!field)
      return make_error(errc::invalid_config, where(origin, key_node.Mark()) + ": unknown key '"
                                                + key + "'");
    std::string text;
    if (value.IsScalar())
      text = value.Scalar();
    else if (value.IsSequence())
      for (size_t i = 0; i < value.size(); ++i)
        text += (i ? "," : "") + (value[i].IsScalar() ? value[i].Scalar() : std::string("?"));
    auto want = field->set(spec, text);
    if (!want.empty())
      return make_error(errc::invalid_config, where(origin, value.Mark()) + ": " + key
                                                + ": expected " + want + ", got '" + text + "'");
  }
  return caf::none;
}

}  // namespace

const std::vector<job_field>& job_fields() {
  static const std::vector<job_field> fields = make_fields();
  return fields;
}

caf::error job_spec_load_text(const std::string& text, const std::string& origin, job_spec& spec) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return make_error(errc::invalid_config,
                      where(origin, e.mark) + ": not valid YAML: " + e.msg);
  }
  if (root.IsNull())
    return caf::none;
  if (!root.IsMap())
    return make_error(errc::invalid_config,
                      where(origin, root.Mark()) + ": expected a map of sections "
                                                   "(name, model, data, training, placement, checkpoint, "
                                                   "supervision, timing)");
  try {
    return load_node(root, "", origin, spec);
  } catch (const YAML::Exception& e) {
    return make_error(errc::invalid_config, where(origin, e.mark) + ": " + e.msg);
  }
}

caf::error job_spec_load_file(const std::string& path, job_spec& spec) {
  auto text = read_text_file(path, job_file_max_bytes, "job file");
  if (!text)
    return text.error();
  auto train = spec.data.train_files, test = spec.data.test_files, valid = spec.data.validation_files;
  auto cache = spec.data.cache_dir;
  auto ckpt = spec.checkpoint.dir, resume = spec.checkpoint.resume_from;
  if (auto err = job_spec_load_text(*text, path, spec))
    return err;
  // Data paths (files, cache folder) the file gives are relative to the file's folder, so a job
  // runs from anywhere.
  auto folder = std::filesystem::absolute(path).parent_path();
  for (auto [files, before] : {std::pair{&spec.data.train_files, &train}, {&spec.data.test_files, &test},
                               {&spec.data.validation_files, &valid}})
    if (*files != *before)
      for (auto& f : *files)
        if (std::filesystem::path(f).is_relative())
          f = (folder / f).lexically_normal().string();
  auto& dir = spec.data.cache_dir;
  if (dir != cache && !dir.empty() && std::filesystem::path(dir).is_relative())
    dir = (folder / dir).lexically_normal().string();
  for (auto [d, before] : {std::pair{&spec.checkpoint.dir, &ckpt},
                           {&spec.checkpoint.resume_from, &resume}})
    if (*d != *before && !d->empty() && std::filesystem::path(*d).is_relative())
      *d = (folder / *d).lexically_normal().string();
  auto& history = spec.training.history_file;
  if (!history.empty() && std::filesystem::path(history).is_relative())
    history = (folder / history).lexically_normal().string();
  return caf::none;
}

namespace {

// The file format follows data.source; checks what the data keys need together.
caf::error data_finalize(data_spec& d) {
  if (d.source == data_source::synthetic)
    return caf::none;
  d.format.format = d.source == data_source::criteo   ? text_format::criteo
                    : d.source == data_source::libffm ? text_format::libffm
                                                      : text_format::libsvm;
  auto bad = [](const std::string& what) { return make_error(errc::invalid_config, what); };
  if (auto want = text_format_check(d.format); !want.empty())
    return bad("data: expected " + want + " for data.source " + data_source_name(d.source));
  if (d.train_files.empty())
    return bad("data.train_files: expected at least one file for data.source "
               + std::string(data_source_name(d.source)));
  return caf::none;
}

}  // namespace

const char* data_source_name(data_source s) {
  switch (s) {
    case data_source::synthetic: return "synthetic";
    case data_source::criteo: return "criteo";
    case data_source::libsvm: return "libsvm";
    case data_source::libfm: return "libfm";
    case data_source::libffm: return "libffm";
  }
  return "?";
}

int job_data_slots(const data_spec& d) {
  return d.source == data_source::synthetic ? d.synthetic.slots : text_format_slots(d.format);
}

int job_data_dense_features(const data_spec& d) {
  return d.source == data_source::synthetic ? d.synthetic.dense_features : text_format_dense_features(d.format);
}

caf::error job_spec_finalize(job_spec& spec) {
  auto bad = [](const std::string& what) { return make_error(errc::invalid_config, what); };
  if (auto err = data_finalize(spec.data))
    return err;
  if (spec.data.source == data_source::synthetic && spec.training.test_batches == 0)
    return bad("training.test_batches: expected at least 1 for synthetic data (0 means the whole "
               "test split, which only file data has)");
  spec.model.network.slots = job_data_slots(spec.data);
  spec.model.network.dense_features = job_data_dense_features(spec.data);
  spec.model.embedding.dim = spec.model.network.dim;
  auto& p = spec.placement;
  if (p.partitions < p.shards)
    return bad("placement.partitions: expected at least placement.shards ("
               + std::to_string(p.shards) + "), got " + std::to_string(p.partitions));
  if (spec.training.train_batches % p.trainers != 0)
    return bad("training.train_batches: expected a multiple of placement.trainers ("
               + std::to_string(p.trainers) + "), got "
               + std::to_string(spec.training.train_batches));
  if (spec.checkpoint.dir.empty())  // a resumed job goes on checkpointing where it resumed from
    spec.checkpoint.dir = spec.checkpoint.resume_from;
  if ((spec.checkpoint.every_steps > 0 || spec.checkpoint.every_seconds > 0)
      && spec.checkpoint.dir.empty())
    return bad("checkpoint.dir: expected a directory when checkpoint.every_steps or "
               "checkpoint.every_seconds is set");
  if (spec.model.network.bottom.empty() && spec.model.network.dense_features != spec.model.network.dim)
    return bad("model.bottom: expected at least one layer");
  for (auto [s, what] : {std::pair{&spec.model.dense.schedule, "model.dense_optimizer.schedule"},
                         {&spec.model.embedding.schedule, "model.embedding.schedule"}})
    if (auto want = lr_schedule_check(*s, what); !want.empty())
      return bad(want);
  if (spec.model.embedding.optimizer == sok::ftrl
      && (spec.model.embedding.schedule.kind != lsk::constant || spec.model.embedding.schedule.warmup_steps > 0))
    return bad("model.embedding.schedule: FTRL keeps per-coordinate rates of its own; expected kind "
               "constant without warm-up for optimizer ftrl");
  auto& net = spec.model.network;
  if (net.type != dense_model_type::dlrm
      && (net.dropout > 0.0f || net.interaction != dlrm_interaction::dot))
    return bad("model.dropout / model.interaction: expected model.type dlrm (the other models have "
               "neither)");
  if (net.precision != dense_precision::fp32 && spec.training.device != dense_device::cuda)
    return bad(std::string("model.precision: ") + dense_precision_name(net.precision)
               + " needs training.device cuda (the CPU dense path computes in fp32 only)");
  auto& d = spec.data;
  if (!d.validation_files.empty() && d.reading.validation_fraction > 0.0)
    return bad("data.validation_fraction: expected 0 when data.validation_files is given (one "
               "validation split)");
  if (d.source == data_source::synthetic && (!d.validation_files.empty() || d.reading.validation_fraction > 0.0))
    return bad("data.validation_files / data.validation_fraction: synthetic data has a validation "
               "stream instead: set training.validation_batches");
  auto& t = spec.training;
  if ((t.early_stopping.patience > 0 || t.target_auc > 0.0) && !job_has_validation(spec))
    return bad(std::string(t.early_stopping.patience > 0 ? "training.early_stopping.patience"
                                                         : "training.target_auc")
               + ": expected a validation split: data.validation_files or data.validation_fraction "
                 "(file data), training.validation_batches (synthetic data)");
  if (spec.metrics.group_by >= spec.model.network.slots)
    return bad("metrics.group_by: expected a slot below " + std::to_string(spec.model.network.slots)
               + ", got " + std::to_string(spec.metrics.group_by));
  // One batch travels as single Cap'n Proto messages (ids, pooled embeddings and their
  // gradients): each blob must stay under Cap'n Proto's 512 MiB and the frame limit. Checked
  // here, not by an actor crashing on an overflow.
  {
    double ids_per_slot = spec.data.source == data_source::synthetic
                            ? std::max(1, spec.data.synthetic.ids_per_sample) : 1.0;
    double per_sample = std::max({net.slots * ids_per_slot * 8.0, net.slots * net.dim * 4.0,
                                  net.dense_features * 4.0 + 8.0});
    double bytes = per_sample * static_cast<double>(spec.training.batch_size);
    if (bytes > static_cast<double>(batch_message_max_bytes)) {
      auto most = static_cast<int64_t>(static_cast<double>(batch_message_max_bytes) / per_sample);
      return bad("training.batch_size: a batch of " + std::to_string(spec.training.batch_size)
                 + " samples is " + std::to_string(static_cast<int64_t>(bytes / 1048576.0))
                 + " MiB in one message (" + std::to_string(net.slots) + " slots of dim "
                 + std::to_string(net.dim) + "); at most "
                 + std::to_string(batch_message_max_bytes >> 20) + " MiB: expected at most "
                 + std::to_string(most) + " samples per batch");
    }
  }
  return caf::none;
}

bool job_has_validation(const job_spec& spec) {
  auto& d = spec.data;
  if (d.source == data_source::synthetic)
    return spec.training.validation_batches > 0;
  return !d.validation_files.empty() || d.reading.validation_fraction > 0.0;
}

// Every key through yaml-cpp's emitter, so that any string (a name "a: b", "{x", "run #7", a
// path with ": ") is quoted as YAML needs; lists as flow sequences; sections in the order of
// their first key.
std::string job_spec_to_yaml(const job_spec& spec) {
  std::vector<std::string> sections;
  std::map<std::string, std::vector<const job_field*>> by_section;
  for (auto& f : job_fields()) {
    auto dot = f.key.find('.');
    auto top = dot == std::string::npos ? std::string{} : f.key.substr(0, dot);
    if (!by_section.count(top))
      sections.push_back(top);
    by_section[top].push_back(&f);
  }
  YAML::Emitter e;
  e << YAML::BeginMap;
  auto emit = [&](const job_field& f, const std::string& key) {
    auto value = f.get(spec);
    e << YAML::Key << key << YAML::Value;
    if (!f.list) {
      e << value;
      return;
    }
    if (value.size() >= 2 && value.front() == '[' && value.back() == ']')
      value = value.substr(1, value.size() - 2);
    e << YAML::Flow << YAML::BeginSeq;
    for (auto& item : split_list(value)) {
      auto b = item.find_first_not_of(' ');
      e << (b == std::string::npos ? std::string{} : item.substr(b));
    }
    e << YAML::EndSeq;
  };
  for (auto& top : sections) {
    if (top.empty()) {
      for (auto* f : by_section[top])
        emit(*f, f->key);
      continue;
    }
    e << YAML::Key << top << YAML::Value << YAML::BeginMap;
    for (auto* f : by_section[top])
      emit(*f, f->key.substr(top.size() + 1));
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

caf::expected<job_spec> job_spec_from_wire(const std::string& yaml, const std::string& origin) {
  auto spec = job_spec_defaults();
  if (auto err = job_spec_load_text(yaml, origin, spec))
    return err;
  if (auto err = job_spec_finalize(spec))
    return err;
  if (job_spec_to_yaml(spec) != yaml)
    return make_error(errc::invalid_config,
                      origin + ": the job spec does not read back as the spec that was sent "
                               "(it must be job_spec_to_yaml's text of a finalized spec)");
  return spec;
}

}  // namespace satrap
