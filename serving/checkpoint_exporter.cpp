#include "serving/checkpoint_exporter.hpp"

#include "models/checkpoint/job_checkpoint.hpp"
#include "runtime/error.hpp"
#include "serving/model_export.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <vector>

namespace satrap {

namespace fs = std::filesystem;

checkpoint_exporter::checkpoint_exporter(job_spec spec, checkpoint_exporter_options options)
    : spec_(std::move(spec)), o_(std::move(options)) {
  o_.keep = std::max(o_.keep, 1);
  std::error_code ec;
  fs::create_directories(o_.out_dir, ec);
  thread_ = std::thread([this] { loop(); });
}

checkpoint_exporter::~checkpoint_exporter() { stop(); }

void checkpoint_exporter::checkpoint_written() {
  {
    std::lock_guard lk(mu_);
    hint_ = true;
  }
  cv_.notify_all();
}

void checkpoint_exporter::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

bool checkpoint_exporter::finish() {
  stop();
  return export_newest();  // the thread is gone: this one is the only caller now
}

int64_t checkpoint_exporter::exported() const {
  std::lock_guard lk(mu_);
  return exported_;
}
int64_t checkpoint_exporter::failures() const {
  std::lock_guard lk(mu_);
  return failures_;
}
int64_t checkpoint_exporter::last_step() const {
  std::lock_guard lk(mu_);
  return last_step_;
}
std::string checkpoint_exporter::last_error() const {
  std::lock_guard lk(mu_);
  return last_error_;
}

void checkpoint_exporter::loop() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    cv_.wait_for(lk, o_.poll, [this] { return hint_ || stopping_; });
    if (stopping_)
      break;
    hint_ = false;
    lk.unlock();
    export_newest();
    lk.lock();
  }
}

bool checkpoint_exporter::export_newest() {
  // A newer checkpoint may retire the one being read (checkpoint.keep): then try again with it.
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto latest = checkpoint_latest(o_.checkpoint_dir);
    std::string why;
    if (!latest) {
      why = latest.failure().message;
    } else if (!*latest) {
      return true;  // no checkpoint yet
    } else {
      auto& meta = **latest;
      {
        std::lock_guard lk(mu_);
        if (meta.step <= last_step_)
          return true;
      }
      auto name = spec_.name + "-step-" + std::to_string(meta.step);
      auto out = (fs::path(o_.out_dir) / name).string();
      std::error_code ec;
      fs::remove_all(out, ec);  // an earlier attempt's leftovers (no MODEL.json: never loaded)
      auto rows = export_checkpoint(spec_, o_.checkpoint_dir, meta, out, o_.shards, "");
      if (rows) {
        std::vector<std::pair<int64_t, fs::path>> mine;  // this job's exports, by step
        for (auto& d : fs::directory_iterator(o_.out_dir, ec)) {
          auto f = d.path().filename().string();
          auto prefix = spec_.name + "-step-";
          if (d.is_directory() && f.rfind(prefix, 0) == 0) {
            try {
              mine.emplace_back(std::stoll(f.substr(prefix.size())), d.path());
            } catch (const std::exception&) {}
          }
        }
        std::sort(mine.begin(), mine.end());
        for (size_t k = 0; k + static_cast<size_t>(o_.keep) < mine.size(); ++k)
          fs::remove_all(mine[k].second, ec);
        spdlog::info("model_exported step={} rows={} dir={}", meta.step, *rows, out);
        std::lock_guard lk(mu_);
        ++exported_;
        last_step_ = meta.step;
        return true;
      }
      why = error_text(rows.error());
      fs::remove_all(out, ec);
      auto again = checkpoint_latest(o_.checkpoint_dir);
      if (again && *again && (**again).sequence != meta.sequence)
        continue;  // retired while read: the newer one next
    }
    spdlog::warn("model_export_failed checkpoint_dir={} error=\"{}\"", o_.checkpoint_dir, why);
    std::lock_guard lk(mu_);
    ++failures_;
    last_error_ = why;
    return false;
  }
  return false;
}

}  // namespace satrap
