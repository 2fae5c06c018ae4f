// Online export: as a job writes checkpoints, each newest one becomes a model folder in a folder
// that `satrap serve --watch` follows, so serving moves to the model as it learns (issue 46;
// `satrap train --export-dir`). A checkpoint is the job's consistent cut (dense state and every
// shard's rows at one step), so an export is one model, never a mix of steps.
//
// Each export is written to <out_dir>/<job>-step-<step>: its MODEL.json last, so a watcher never
// loads one half-written (models/serving/exported_model.hpp); then the oldest exports past `keep`
// are deleted (a server that still maps one keeps its pages until it lets go). A checkpoint that
// retention removes while it is read is not an error: the next one is exported instead. Other
// failures are counted, logged and kept in last_error(), and the next checkpoint is tried.
// Threading: one thread of its own; the public calls are thread-safe.
#pragma once

#include "spec/job_spec.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace satrap {

struct checkpoint_exporter_options {
  std::string checkpoint_dir;  // the job's checkpoint.dir
  std::string out_dir;         // where the model folders go (created)
  int keep = 3;                // newest exports kept (>= 1)
  uint32_t shards = 1;         // export shards per model folder
  // How often the checkpoint folder is looked at without a hint (checkpoint_written).
  std::chrono::milliseconds poll{1000};
};

class checkpoint_exporter {
 public:
  checkpoint_exporter(job_spec spec, checkpoint_exporter_options options);
  ~checkpoint_exporter();  // stop()
  checkpoint_exporter(const checkpoint_exporter&) = delete;
  checkpoint_exporter& operator=(const checkpoint_exporter&) = delete;

  // A checkpoint was written (progress saw it): look now.
  void checkpoint_written();
  // Exports the newest checkpoint if it is not yet, then stops the thread. True when the newest
  // checkpoint is exported (or there is none).
  bool finish();
  void stop();

  int64_t exported() const;
  int64_t failures() const;
  int64_t last_step() const;  // the newest exported step (-1: none)
  std::string last_error() const;

 private:
  void loop();
  bool export_newest();  // under no lock; true when nothing is left to do

  job_spec spec_;
  checkpoint_exporter_options o_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool hint_ = false, stopping_ = false;
  int64_t exported_ = 0, failures_ = 0, last_step_ = -1;
  std::string last_error_;
  std::thread thread_;
};

}  // namespace satrap
