// The keys of how the job runs: training.*, metrics.*, placement.*, checkpoint.*, supervision.*
// and timing.*. Their rows in the key table and the checks of the keys taken together. (See
// job_spec_fields.hpp for how the job spec's files are laid out.)
#include "spec/job_spec_fields.hpp"

#include <algorithm>

namespace satrap::job_spec_detail {

std::vector<job_field> run_fields() {
  return {
    SATRAP_INT_FIELD("training.batch_size", "batch-size", "samples per batch (per trainer)",
                     training.batch_size, 1, 1 << 20),
    SATRAP_INT_FIELD("training.train_batches", "train-batches", "training batches in all",
                     training.train_batches, int64_t{0}, i64max),
    SATRAP_INT_FIELD("training.test_batches", "test-batches",
                     "held-out batches (0: the whole test split of file data)",
                     training.test_batches, int64_t{0}, i64max),
    SATRAP_INT_FIELD("training.epochs", "epochs",
                     "file data with train_batches 0: passes over the data", training.epochs, 1,
                     1 << 20),
    SATRAP_INT_FIELD("training.staleness", "staleness", "K: max missed embedding steps (0 = sync)",
                     training.staleness, 0, 1024),
    SATRAP_ENUM_FIELD("training.device", "device", "where the dense trainers compute",
                      training.device, {"cpu", dense_device::cpu}, {"cuda", dense_device::cuda}),
    SATRAP_INT_FIELD("training.seed", "seed", "dense model seed", training.seed, uint64_t{0},
                     u64max),
    SATRAP_INT_FIELD("training.progress_every", "", "steps between progress reports",
                     training.progress_every, 1, i32max),
    SATRAP_INT_FIELD(
      "training.blas_threads", "blas-threads",
      "OpenBLAS threads of a CPU trainer, while it is the only one in its process "
      "(0: auto, the process's cores for a dense network of >= 50k parameters, else 1)",
      training.blas_threads, 0, 256),
    SATRAP_INT_FIELD("training.eval_every", "eval-every",
                     "steps between validation evaluations (0: each epoch; synthetic: at the end)",
                     training.eval_every, int64_t{0}, i64max),
    SATRAP_INT_FIELD(
      "training.validation_batches", "validation-batches",
      "file data: validation batches at most (0: all); synthetic: the validation stream (0: none)",
      training.validation_batches, int64_t{0}, i64max),
    job_field{
      "training.task_weights", "task-weights",
      "each label's loss weight, in data.labels' order (none: each weighs 1); the "
      "validation and test figures of several tasks are their means by these weights",
      [](job_spec& s, const std::string& t) { return parse_weights(t, s.training.task_weights); },
      [](const job_spec& s) { return show_weights(s.training.task_weights); }, true},
    SATRAP_ENUM_FIELD("training.early_stopping.metric", "early-stopping-metric",
                      "early stopping: the validation metric", training.early_stopping.metric,
                      {"auc", stop_metric::auc}, {"logloss", stop_metric::logloss}),
    SATRAP_INT_FIELD(
      "training.early_stopping.patience", "early-stopping-patience",
      "stop after this many evaluations without improvement, restore the best model (0: off)",
      training.early_stopping.patience, 0, i32max),
    SATRAP_REAL_FIELD("training.early_stopping.min_delta", "",
                      "early stopping: the smallest improvement that counts",
                      training.early_stopping.min_delta, 0.0, 1.0),
    SATRAP_REAL_FIELD("training.target_auc", "target-auc",
                      "stop once validation AUC reaches this (0: off)", training.target_auc, 0.0,
                      1.0),
    SATRAP_STRING_FIELD("training.history_file", "history-file",
                        "validation history as JSON lines (\"\": none)", training.history_file),
    SATRAP_INT_FIELD("metrics.group_by", "group-by",
                     "slot whose first id groups the grouped AUC, e.g. the user (-1: none)",
                     metrics.group_by, -1, 1023),
    SATRAP_INT_FIELD("placement.shards", "shards", "embedding shards", placement.shards, 1, 4096),
    SATRAP_INT_FIELD("placement.aggregators", "aggregators", "gradient aggregators",
                     placement.aggregators, 1, 4096),
    SATRAP_INT_FIELD("placement.loaders", "loaders", "data loaders", placement.loaders, 1, 4096),
    SATRAP_INT_FIELD("placement.trainers", "trainers", "dense trainer replicas", placement.trainers,
                     1, 1024),
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
    SATRAP_INT_FIELD("checkpoint.full_every", "",
                     "every Nth checkpoint is full, others incremental", checkpoint.full_every, 1,
                     i32max),
    SATRAP_INT_FIELD("checkpoint.keep", "checkpoint-keep",
                     "complete checkpoints kept (older ones deleted, but never one the kept "
                     "ones' incremental chains need; 0: keep all)",
                     checkpoint.keep, 0, i32max),
    SATRAP_STRING_FIELD("checkpoint.resume_from", "resume",
                        "continue from the newest checkpoint in this directory",
                        checkpoint.resume_from),
    SATRAP_INT_FIELD("supervision.max_restarts", "max-restarts",
                     "restarts allowed within supervision.window_s; past it the job fails",
                     supervision.max_restarts, 0, 1000),
    SATRAP_INT_FIELD("supervision.window_s", "", "restart intensity window, seconds",
                     supervision.window_s, 1, i32max),
    // Timeouts and intervals (spec/knobs.hpp says what each is for), milliseconds.
    SATRAP_INT_FIELD("timing.kafka_timeout_ms", "",
                     "a Kafka broker's answer (data.source kafka), ms", timing.kafka_timeout_ms,
                     int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.kafka_lag_interval_ms", "",
                     "a Kafka stream's partition ends asked this often, for its lag, ms; 0: never",
                     timing.kafka_lag_interval_ms, int64_t{0}, i64max),
    SATRAP_INT_FIELD("timing.spawn_timeout_ms", "", "a node agent spawning one actor, ms",
                     timing.spawn_timeout_ms, int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.trainer_request_timeout_ms", "",
                     "a trainer's request to a loader or an aggregator, ms",
                     timing.trainer_request_timeout_ms, int64_t{1}, i64max),
    SATRAP_INT_FIELD("timing.shard_request_timeout_ms", "",
                     "an aggregator's request to a shard, ms", timing.shard_request_timeout_ms,
                     int64_t{1}, i64max),
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
                     "pause after a failure before re-placing the job, ms", timing.replan_delay_ms,
                     int64_t{0}, i64max),
  };
}

namespace {

// One batch travels as single Cap'n Proto messages (ids, pooled embeddings and their gradients):
// each blob must stay under Cap'n Proto's 512 MiB and the frame limit. Checked here, not by an
// actor crashing on an overflow.
caf::error batch_bytes_check(const job_spec& spec) {
  auto& net = spec.model.network;
  double ids_per_slot = spec.data.source == data_source::synthetic
                          ? job_synthetic_ids_per_slot(spec.data)
                          : 1.0;
  double id_bytes = net.slots * ids_per_slot * 8.0;
  if (!spec.data.format.features.empty()) {  // named features: their max_length (a bag without
    id_bytes = 0.0;                          // one counts 1: its size is known only when read)
    for (auto& f : spec.data.format.features)
      if (f.kind != feature_kind::dense)
        id_bytes += std::max(1, f.max_length) * (8.0 + 4.0);  // an id and its weight
  }
  double per_sample =
    std::max({id_bytes, net.slots * net.dim * 4.0, net.dense_features * 4.0 + 8.0});
  double bytes = per_sample * static_cast<double>(spec.training.batch_size);
  if (bytes <= static_cast<double>(batch_message_max_bytes))
    return caf::none;
  auto most = static_cast<int64_t>(static_cast<double>(batch_message_max_bytes) / per_sample);
  return bad_spec("training.batch_size: a batch of " + std::to_string(spec.training.batch_size)
                  + " samples is " + std::to_string(static_cast<int64_t>(bytes / 1048576.0))
                  + " MiB in one message (" + std::to_string(net.slots) + " slots of dim "
                  + std::to_string(net.dim) + "); at most "
                  + std::to_string(batch_message_max_bytes >> 20) + " MiB: expected at most "
                  + std::to_string(most) + " samples per batch");
}

}  // namespace

// Runs after data_finalize and model_finalize: the network's slots are known.
caf::error run_finalize(job_spec& spec) {
  auto& t = spec.training;
  if (spec.data.source == data_source::synthetic && t.test_batches == 0)
    return bad_spec(
      "training.test_batches: expected at least 1 for synthetic data (0 means the whole "
      "test split, which only file data has)");
  auto& p = spec.placement;
  if (p.partitions < p.shards)
    return bad_spec("placement.partitions: expected at least placement.shards ("
                    + std::to_string(p.shards) + "), got " + std::to_string(p.partitions));
  if (t.train_batches % p.trainers != 0)
    return bad_spec("training.train_batches: expected a multiple of placement.trainers ("
                    + std::to_string(p.trainers) + "), got " + std::to_string(t.train_batches));
  if (spec.checkpoint.dir.empty())  // a resumed job goes on checkpointing where it resumed from
    spec.checkpoint.dir = spec.checkpoint.resume_from;
  if ((spec.checkpoint.every_steps > 0 || spec.checkpoint.every_seconds > 0)
      && spec.checkpoint.dir.empty())
    return bad_spec(
      "checkpoint.dir: expected a directory when checkpoint.every_steps or "
      "checkpoint.every_seconds is set");
  if ((t.early_stopping.patience > 0 || t.target_auc > 0.0) && !job_has_validation(spec))
    return bad_spec(std::string(t.early_stopping.patience > 0 ? "training.early_stopping.patience"
                                                              : "training.target_auc")
                    + ": expected a validation split: data.validation_files or data.validation_fraction "
                      "(file data), training.validation_batches (synthetic data)");
  if (spec.metrics.group_by >= spec.model.network.slots)
    return bad_spec("metrics.group_by: expected a slot below "
                    + std::to_string(spec.model.network.slots) + ", got "
                    + std::to_string(spec.metrics.group_by));
  return batch_bytes_check(spec);
}

}  // namespace satrap::job_spec_detail
