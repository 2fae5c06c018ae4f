// The end of a job: every trainer reported, so the supervisor reads the shards' statistics,
// sums up the result (job_result), writes the final model's embeddings when asked, delivers the
// result and stops the job.
#include "actors/job_supervisor/supervisor_state.hpp"

#include "models/embedding/embedding_snapshot.hpp"
#include "models/metrics.hpp"
#include "runtime/error.hpp"
#include "runtime/payload_checks.hpp"

#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>

namespace satrap::supervisor {

namespace {

job_result summarize(supervisor_state& st, clock_type::time_point now) {
  job_result r;
  std::vector<float> logits, labels, probs;
  std::vector<uint64_t> groups;
  auto& spec = st.config.spec;
  auto per_step = static_cast<double>(spec.training.batch_size) * spec.placement.trainers;
  for (auto l : st.cuts.committed_losses())
    r.step_losses.push_back(l / per_step);
  for (auto l : st.cuts.pending_losses())
    r.step_losses.push_back(l / per_step);
  r.samples = st.cuts.committed_samples() + st.cuts.pending_samples();
  auto base = r.step_losses.size();
  std::vector<std::vector<float>> by_rank;  // each trainer's logits: its batches rank, rank+W, ...
  for (auto& rep : st.reports) {
    auto before = static_cast<std::ptrdiff_t>(logits.size());
    if (auto ev = decode_eval_result(rep.eval, static_cast<uint32_t>(spec.model.network.tasks))) {
      for (auto [v, dst] :
           {std::pair{ev->logits, &logits}, {ev->labels, &labels}, {ev->probs, &probs}})
        dst->insert(dst->end(), v.begin(), v.end());
      groups.insert(groups.end(), ev->groups.begin(), ev->groups.end());
    } else {  // reported with the result, not dropped: its predictions are left out of the AUC
      spdlog::error("job_bad_eval_result rank={} error=\"{}\"", rep.rank, error_text(ev.error()));
      st.rec.add_failure("trainer " + std::to_string(rep.rank)
                         + ": test predictions left out: " + error_text(ev.error()));
    }
    by_rank.emplace_back(logits.begin() + before, logits.end());
    r.steps = std::max(r.steps, rep.steps);
    r.samples += rep.samples;
    r.step_losses.resize(std::max(r.step_losses.size(), base + rep.step_losses.size()), 0.0);
    for (size_t i = 0; i < rep.step_losses.size(); ++i)
      r.step_losses[base + i] += rep.step_losses[i] / per_step;
    r.params.push_back(rep.params);
  }
  const int tasks = spec.model.network.tasks;
  const auto& task_weights = spec.model.network.task_weights;
  auto per_task =
    compute_task_metrics(logits, labels,
                         groups.size() * tasks == labels.size() ? std::span<const uint64_t>(groups)
                                                                : std::span<const uint64_t>(),
                         tasks);
  auto m = combine_task_metrics(per_task, task_weights);
  // The logits again in test-batch order (only the split's last batch may be short).
  std::vector<size_t> taken(by_rank.size(), 0);
  const auto bs = static_cast<size_t>(spec.training.batch_size) * tasks;
  for (size_t k = 0; !by_rank.empty(); ++k) {
    auto t = k % by_rank.size();
    auto n = std::min(bs, by_rank[t].size() - taken[t]);
    if (n == 0)
      break;
    r.test_logits.insert(r.test_logits.end(), by_rank[t].begin() + taken[t],
                         by_rank[t].begin() + taken[t] + n);
    taken[t] += n;
  }
  r.test_auc = m.auc;
  r.oracle_auc = std::nan("");
  if (probs.size() == labels.size() && tasks == 1) {
    r.oracle_auc = auc_exact(probs, labels);
  } else if (probs.size() == labels.size()) {
    std::vector<eval_metrics> oracle(per_task.size());
    for (int t = 0; t < tasks; ++t) {
      auto p = task_column(probs, tasks, t);
      auto y = task_column(labels, tasks, t);
      oracle[t].auc = auc_exact(p, y);
      r.task_oracle_auc.push_back(oracle[t].auc);
    }
    r.oracle_auc = combine_task_metrics(oracle, task_weights).auc;
  }
  if (tasks > 1) {
    r.task_names = spec.data.labels;
    for (auto& t : per_task) {
      r.task_test_auc.push_back(t.auc);
      r.task_test_logloss.push_back(t.logloss);
    }
  }
  r.test_logloss = m.logloss;
  r.test_ne = m.ne;
  r.test_calibration = m.calibration;
  r.test_gauc = m.gauc;
  r.steps_total = st.steps;
  r.validation_history = st.best.history();
  if (st.best.best_step() >= 0) {
    r.best_step = st.best.best_step();
    r.validation_auc = st.best.best().auc;
    r.validation_logloss = st.best.best().logloss;
    r.validation_gauc = st.best.best().gauc;
  }
  r.stop_reason = st.best.stop_reason();
  r.restored_validation_auc = st.best.restored_validation_auc();
  r.target_seconds = st.best.target_seconds();
  r.target_samples = st.best.target_samples();
  r.test_samples = static_cast<int64_t>(labels.size()) / tasks;
  r.data_skipped = st.data.skipped;
  r.train_seconds = std::chrono::duration<double>(now - st.started).count();
  r.samples_per_sec = r.train_seconds > 0 ? static_cast<double>(r.samples) / r.train_seconds : 0.0;
  r.restarts = st.progress.restarts;
  r.batches_replayed = st.progress.batches_replayed;
  r.checkpoints = st.progress.checkpoints;
  r.failures = st.rec.failures();
  return r;
}

// The final model's embeddings (config.final_snapshot_dir, for `satrap train --export`): every
// shard writes a full snapshot after the evaluation, the manifest last; then the result goes out.
void write_final_snapshot(self_ptr self, std::shared_ptr<job_result> result) {
  auto& st = self->state;
  auto dir = st.config.final_snapshot_dir;
  if (dir.empty()) {
    st.done->deliver(std::move(*result));
    stop_job(self);  // a finished job leaves no actor behind
    return;
  }
  auto seq = st.cuts.sequence() + 1;  // above any snapshot a shard's table was marked at
  snapshot_shards(
    self, dir, seq, true,
    [self, result, dir, seq](std::vector<snapshot_file_info> files) {
      auto written = snapshot_write_manifest(dir, seq, 0, self->state.config.spec.model.embedding,
                                             files, *self->state.config.environment);
      if (!written) {
        fail_job(self, make_error(errc::io_failure, "final snapshot: " + written.error()));
        return;
      }
      spdlog::info("final_snapshot_written sequence={} dir={}", seq, dir);
      self->state.done->deliver(std::move(*result));
      stop_job(self);
    },
    [self, gen = st.generation](const caf::error& e) {
      if (gen == self->state.generation)  // past training: no restart, the export fails
        fail_job(self, make_error(errc::io_failure, "final snapshot: " + error_text(e)));
    });
}

}  // namespace

// Every trainer reported: the training and the evaluation are done. Reads each shard's
// statistics, then delivers the result and stops the job. From here on a failure (a shard's node
// lost, a statistics request timing out) does not restart the job: the result stands and only
// that shard's statistics are missing (shards[i].shard == -1).
void finish(self_ptr self) {
  auto& st = self->state;
  st.rec.finishing();
  if (!st.best.dir().empty() && !st.cuts.enabled()) {  // a temporary best model: not kept
    (void)st.config.environment->remove_all(st.best.dir());
  }
  std::sort(st.reports.begin(), st.reports.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  auto result = std::make_shared<job_result>(summarize(st, self->clock().now()));
  result->shards.assign(st.shards.size(), shard_stats{});
  for (auto& s : result->shards)
    s.shard = -1;
  auto left = std::make_shared<size_t>(st.shards.size());
  auto gen = st.generation;
  auto one_done = [self, result, left] {
    if (--*left == 0)
      write_final_snapshot(self, result);  // then delivers the result and stops the job's actors
  };
  for (size_t i = 0; i < st.shards.size(); ++i)
    self->request(st.shards[i], ms(st.config.spec.timing.stats_timeout_ms), stats_atom::value)
      .then(
        [self, result, gen, i, one_done](shard_stats& s) {
          if (gen != self->state.generation)
            return;
          result->embedding_rows += s.rows;
          result->gradients_lost += s.not_admitted_gradients;
          result->shards[i] = std::move(s);
          one_done();
        },
        [self, gen, i, one_done](const caf::error& e) {
          if (gen != self->state.generation)
            return;
          spdlog::warn("job_shard_statistics_lost shard={} error=\"{}\"", i, error_text(e));
          one_done();
        });
}

}  // namespace satrap::supervisor
