// The one-line progress of a training job, rewritten in place on a terminal (stderr): the same
// line for `satrap train` and `satrap submit --follow`.
#pragma once

#include "actors/job_supervisor/job_supervisor.hpp"

#include <cstdio>

namespace satrap {

inline void print_progress_line(const job_progress& p) {
  char validation[96] = "";  // the latest validation AUC, and the best, once there is one
  if (p.validation_step >= 0)
    std::snprintf(validation, sizeof validation, "  val auc %.4f (best %.4f @%lld)",
                  p.validation_auc, p.best_validation_auc, static_cast<long long>(p.best_step));
  char lag[48] = "";  // a stream's messages not yet trained
  if (p.stream_lag >= 0)
    std::snprintf(lag, sizeof lag, "  lag %lld", static_cast<long long>(p.stream_lag));
  char tier[64] = "";  // the SSD tier: share of ids found in RAM, and its RAM
  if (p.tier_ram_bytes >= 0 && p.tier_hits + p.tier_misses > 0)
    std::snprintf(
      tier, sizeof tier, "  tier hits %.3f ram %.0f MiB",
      static_cast<double>(p.tier_hits) / static_cast<double>(p.tier_hits + p.tier_misses),
      static_cast<double>(p.tier_ram_bytes) / 1048576.0);
  std::fprintf(stderr,
               "\r  step %lld/%lld  samples %lld  %.0f samples/s%s%s  loss %.4f  auc %.4f%s   ",
               static_cast<long long>(p.steps), static_cast<long long>(p.steps_total),
               static_cast<long long>(p.samples), p.samples_per_sec, lag, tier, p.loss,
               p.running_auc, validation);
  std::fflush(stderr);
}

}  // namespace satrap
