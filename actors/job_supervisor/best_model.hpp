// Validation while training and the best model (early stopping's kept model), as a state machine
// with no actor in it: the job supervisor feeds it what the trainers trained between cuts and the
// metrics of each validation, and carries out what it decides (snapshot the shards as the best
// model's embeddings, restore the best model at the end, stop training). It knows which steps are
// validation points, keeps the history of validations, the best one (its step, metrics, DenseState
// and the sequence of its embedding snapshot under dir()), and whether training stops at this cut
// (early stopping: training.early_stopping; training.target_auc).
// Threading: not thread-safe; owned by one supervisor.
#pragma once

#include "models/metrics.hpp"
#include "runtime/payload.hpp"
#include "spec/job_spec.hpp"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace satrap {

class best_model {
 public:
  struct policy {
    int64_t steps = 0;               // steps per trainer planned
    int64_t validation_batches = 0;  // 0: no validation
    int64_t every = 0;               // steps between validations (training.eval_every or an epoch)
    early_stopping_spec early_stopping;
    double target_auc = 0.0;  // training.target_auc (0: none)
  };

  // What one validation decided.
  struct verdict {
    bool improved = false;        // the best so far
    bool target_reached = false;  // training.target_auc first reached now
    bool early_stopped = false;   // patience used up now
    bool snapshot = false;        // keep it: snapshot the shards (then snapshot_kept)
  };

  void configure(policy p) { policy_ = std::move(p); }
  // Where the best model's embeddings go (a full snapshot under it); "" when none is kept.
  void set_dir(std::string dir) { dir_ = std::move(dir); }
  const std::string& dir() const { return dir_; }
  // Whether a best model is kept (training.early_stopping.patience > 0).
  bool keeps() const { return policy_.early_stopping.patience > 0; }

  // Whether step `c` is a validation point; the next one after `from`, or -1.
  bool is_validation_cut(int64_t c) const;
  int64_t next_validation_cut(int64_t from) const;

  // Trained between cuts (samples, summed per-sample losses): the next point's training loss.
  void on_trained(int64_t samples, double loss_sum);
  // The mean training loss since the previous validation (NaN: none), and starts over.
  double take_train_loss();
  // Records a validation point (a JSON object); true for the first one.
  bool record(std::string line);
  // The validation at step `c` measured `m`, `seconds` and `samples` into the job; `dense` is the
  // model's DenseState at the cut.
  verdict on_validated(int64_t c, const eval_metrics& m, double seconds, int64_t samples,
                       const capnp_payload& dense);
  // The snapshot asked for by a verdict is written as `sequence`: returns the previous best's
  // sequence, no longer needed (0: none).
  uint64_t snapshot_kept(uint64_t sequence);
  // At the end of training at cut `c`: whether the best model must be restored (an older one).
  bool must_restore(int64_t c) const;
  // The restored best model measured again.
  void revalidated(double auc) { restored_validation_auc_ = auc; }
  // A failure: cuts after the newest checkpoint are trained again, their validations evaluated
  // again.
  void roll_back();

  bool stopping() const { return stopping_; }
  double score(const eval_metrics& m) const;
  const std::vector<std::string>& history() const { return history_; }
  int64_t best_step() const { return best_step_; }
  const eval_metrics& best() const { return best_; }
  const capnp_payload& best_dense() const { return best_dense_; }
  uint64_t best_snapshot() const { return best_snapshot_; }
  double restored_validation_auc() const { return restored_validation_auc_; }
  const std::string& stop_reason() const { return stop_reason_; }
  double target_seconds() const { return target_seconds_; }
  int64_t target_samples() const { return target_samples_; }

 private:
  policy policy_;
  std::string dir_;
  double loss_since_eval_ = 0.0;  // training loss sum since the previous validation
  int64_t samples_since_eval_ = 0;
  std::vector<std::string> history_;               // validation points, JSON objects
  int64_t best_step_ = -1;                         // step of the best validation so far
  eval_metrics best_;                              // its metrics
  capnp_payload best_dense_;                       // its DenseState (in memory)
  uint64_t best_snapshot_ = 0;                     // its embedding snapshot's sequence (0: none)
  int32_t since_best_ = 0;                         // evaluations since the best
  double restored_validation_auc_ = std::nan("");  // the restored best model, measured again
  bool stopping_ = false;                          // training ends at this cut
  std::string stop_reason_;                        // early_stopping, target_auc
  double target_seconds_ = -1.0;                   // when validation AUC first reached target_auc
  int64_t target_samples_ = -1;
};

}  // namespace satrap
