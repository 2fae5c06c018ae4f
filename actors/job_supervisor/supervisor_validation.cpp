// Validation while training: at a validation cut every trainer holds at step c with every step
// before it applied and no later lookup started, so the model (dense replicas and embedding
// shards) is one consistent state. The trainers then evaluate their shares of the validation
// split with read-only lookups; the supervisor computes the metrics, records the point, keeps the
// best model (its DenseState in memory, its embeddings as a full snapshot under best_dir) and
// decides whether to stop (early stopping, target AUC). At the end of training the best model is
// restored on every shard and trainer before the test evaluation.
#include "actors/job_supervisor/supervisor_state.hpp"

#include "models/embedding/embedding_snapshot.hpp"
#include "models/lr_schedule.hpp"
#include "runtime/error.hpp"
#include "runtime/payload_checks.hpp"
#include "satrap_schemas/step.capnp.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace satrap::supervisor {

namespace {

nlohmann::json number_or_null(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json();
}

// Snapshots every shard's table as the best model's embeddings, then runs `next`.
void snapshot_best(self_ptr self, std::function<void()> next) {
  auto& st = self->state;
  auto gen = st.generation;
  auto seq = st.cuts.reserve_snapshot_sequence();
  snapshot_shards(
    self, st.best.dir(), seq, true,
    [self, seq, next](std::vector<snapshot_file_info> files) {
      auto& st = self->state;
      auto written = snapshot_write_manifest(st.best.dir(), seq, 0, st.config.spec.model.embedding,
                                             files, *st.config.environment);
      if (!written) {
        fail_job(self, make_error(errc::io_failure, "best model snapshot: " + written.error()));
        return;
      }
      if (auto previous = st.best.snapshot_kept(seq); previous > 0)  // no longer needed
        (void)st.config.environment->remove_all(snapshot_dir(st.best.dir(), previous));
      st.cuts.snapshot_taken();
      next();
    },
    [self, gen](const caf::error& e) {
      on_failure(self, gen, "best model snapshot: " + error_text(e));
    });
}

// Loads the best model on every shard and trainer, then runs `next`.
void restore_best(self_ptr self, std::function<void()> next) {
  auto& st = self->state;
  auto gen = st.generation;
  auto left = std::make_shared<size_t>(st.shards.size() + st.trainers.size());
  auto one_done = [self, gen, left, next] {
    auto& st = self->state;
    if (gen != st.generation || --*left > 0)
      return;
    spdlog::info("best_model_restored step={} validation_auc={:.5f} snapshot={}",
                 st.best.best_step(), st.best.best().auc, st.best.best_snapshot());
    next();
  };
  auto on_error = [self, gen](const caf::error& e) {
    on_failure(self, gen, "restoring the best model: " + error_text(e));
  };
  for (auto& s : st.shards)
    self
      ->request(s, ms(st.config.spec.timing.restore_timeout_ms), restore_atom::value, st.best.dir(),
                st.best.best_snapshot())
      .then([one_done](int64_t) { one_done(); }, on_error);
  for (auto& t : st.trainers)
    self
      ->request(t, ms(st.config.spec.timing.dense_restore_timeout_ms), restore_atom::value,
                st.best.best_dense())
      .then([one_done](int64_t) { one_done(); }, on_error);
}

// The metrics of every trainer's predictions; a result that does not decode is an error (it
// comes from another process: runtime/payload_checks.hpp).
// Several tasks (data.labels): the task-weighted mean, each task's in per_task_out.
caf::expected<eval_metrics> metrics_of(const std::vector<capnp_payload>& results, int tasks,
                                       std::span<const float> task_weights,
                                       std::vector<eval_metrics>* per_task_out) {
  std::vector<float> logits, labels;
  std::vector<uint64_t> groups;
  for (auto& p : results) {
    auto ev = decode_eval_result(p, static_cast<uint32_t>(tasks));
    if (!ev)
      return ev.error();
    logits.insert(logits.end(), ev->logits.begin(), ev->logits.end());
    labels.insert(labels.end(), ev->labels.begin(), ev->labels.end());
    groups.insert(groups.end(), ev->groups.begin(), ev->groups.end());
  }
  auto per_task =
    compute_task_metrics(logits, labels,
                         groups.size() * tasks == labels.size() ? std::span<const uint64_t>(groups)
                                                                : std::span<const uint64_t>(),
                         tasks);
  if (per_task_out)
    *per_task_out = per_task;
  return combine_task_metrics(per_task, task_weights);
}

// Every trainer evaluates its share of the validation split; `done` gets the metrics.
using validated_fn = std::function<void(const eval_metrics&, const std::vector<eval_metrics>&)>;
void evaluate_validation(self_ptr self, const std::string& what, validated_fn done) {
  auto& st = self->state;
  auto gen = st.generation;
  auto results = std::make_shared<std::vector<capnp_payload>>(st.trainers.size());
  auto left = std::make_shared<size_t>(st.trainers.size());
  for (size_t i = 0; i < st.trainers.size(); ++i)
    self
      ->request(st.trainers[i], ms(st.config.spec.timing.validation_timeout_ms), eval_atom::value,
                st.data.validation_batches)
      .then(
        [self, gen, i, results, left, done, what](capnp_payload& p) {
          if (gen != self->state.generation)
            return;
          (*results)[i] = std::move(p);
          if (--*left > 0)
            return;
          auto& net = self->state.config.spec.model.network;
          std::vector<eval_metrics> per_task;
          auto m = metrics_of(*results, net.tasks, net.task_weights, &per_task);
          if (!m) {
            fail_job(self, make_error(errc::invalid_payload, what + ": " + error_text(m.error())));
            return;
          }
          done(*m, per_task);
        },
        [self, gen, what](const caf::error& e) {
          on_failure(self, gen, what + ": " + error_text(e));
        });
}

void on_validated(self_ptr self, int64_t c, const eval_metrics& m,
                  const std::vector<eval_metrics>& per_task, std::function<void()> next) {
  auto& st = self->state;
  auto& spec = st.config.spec;
  auto secs = std::chrono::duration<double>(self->clock().now() - st.started).count();
  auto samples = st.cuts.committed_samples() + st.cuts.pending_samples();
  double train_loss = st.best.take_train_loss();
  auto dense_lr = spec.model.dense.learning_rate * lr_factor(spec.model.dense.schedule, c);
  auto sparse_lr = spec.model.embedding.learning_rate * lr_factor(spec.model.embedding.schedule, c);
  nlohmann::json point = {
    {"step", c},
    {"epoch", st.data.epoch_steps > 0
                ? number_or_null(static_cast<double>(c) / static_cast<double>(st.data.epoch_steps))
                : nlohmann::json()},
    {"samples", samples},
    {"seconds", secs},
    {"samples_per_sec", secs > 0 ? static_cast<double>(samples) / secs : 0.0},
    {"train_loss", number_or_null(train_loss)},
    {"validation_auc", m.auc},
    {"validation_logloss", m.logloss},
    {"validation_ne", number_or_null(m.ne)},
    {"validation_calibration", number_or_null(m.calibration)},
    {"validation_gauc", number_or_null(m.gauc)},
    {"validation_samples", m.samples},
    {"dense_lr", dense_lr},
    {"embedding_lr", sparse_lr},
  };
  if (per_task.size() > 1) {  // the figures above are the task-weighted means
    auto& labels = spec.data.labels;
    for (size_t t = 0; t < per_task.size() && t < labels.size(); ++t)
      point["tasks"][labels[t]] = {{"auc", per_task[t].auc},
                                   {"logloss", per_task[t].logloss},
                                   {"ne", number_or_null(per_task[t].ne)}};
  }
  auto line = point.dump();
  bool first = st.best.record(line);
  if (!spec.training.history_file.empty()) {
    auto& files = *st.config.environment;  // the first point starts the file, the others append
    auto& path = spec.training.history_file;
    if (!(first ? files.write_file_atomic(path, line + "\n", false)
                : files.append_file(path, line + "\n")))
      spdlog::warn("history_file_unwritable path={}", spec.training.history_file);
  }
  spdlog::info(
    "validation step={} auc={:.5f} logloss={:.5f} ne={:.4f} calibration={:.4f} gauc={:.5f} "
    "train_loss={:.5f} samples={}",
    c, m.auc, m.logloss, m.ne, m.calibration, m.gauc, train_loss, m.samples);
  auto v = st.best.on_validated(c, m, secs, samples, st.cuts.dense_state());
  if (v.target_reached)
    spdlog::info("target_auc_reached step={} auc={:.5f} target={} seconds={:.1f} samples={}", c,
                 m.auc, spec.training.target_auc, secs, samples);
  if (v.early_stopped)
    spdlog::info("early_stopping step={} best_step={} best={:.5f} patience={}", c,
                 st.best.best_step(), st.best.score(st.best.best()),
                 spec.training.early_stopping.patience);
  auto& p = st.progress;
  p.validation_step = c;
  p.validation_auc = m.auc;
  p.validation_logloss = m.logloss;
  p.best_step = st.best.best_step();
  p.best_validation_auc = st.best.best().auc;
  notify(st);
  if (v.snapshot) {
    snapshot_best(self, std::move(next));
    return;
  }
  next();
}

}  // namespace

void validate_at_cut(self_ptr self, std::function<void()> next) {
  auto c = self->state.cuts.cut();
  evaluate_validation(self, "validation at step " + std::to_string(c),
                      [self, c, next](const eval_metrics& m, const std::vector<eval_metrics>& t) {
                        on_validated(self, c, m, t, next);
                      });
}

void after_cut(self_ptr self) {
  auto& st = self->state;
  auto c = st.cuts.cut();
  bool last_cut = st.best.stopping() || c >= st.steps;
  if (!last_cut) {
    release_trainers(self, next_cut(st, c));
    return;
  }
  st.cuts.end();
  auto stop = [self] { release_trainers(self, stop_at_cut); };
  if (st.best.must_restore(c)) {
    // Restore the best model, and measure it again: the result must be the recorded best.
    restore_best(self, [self, stop] {
      evaluate_validation(self, "validating the restored best model",
                          [self, stop](const eval_metrics& m, const std::vector<eval_metrics>&) {
                            auto& st = self->state;
                            st.best.revalidated(m.auc);
                            spdlog::info(
                              "best_model_revalidated step={} auc={:.6f} recorded={:.6f}",
                              st.best.best_step(), m.auc, st.best.best().auc);
                            stop();
                          });
    });
    return;
  }
  stop();
}

}  // namespace satrap::supervisor
