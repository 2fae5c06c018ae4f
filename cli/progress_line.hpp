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
  std::fprintf(stderr, "\r  step %lld/%lld  samples %lld  %.0f samples/s  loss %.4f  auc %.4f%s   ",
               static_cast<long long>(p.steps), static_cast<long long>(p.steps_total),
               static_cast<long long>(p.samples), p.samples_per_sec, p.loss, p.running_auc,
               validation);
  std::fflush(stderr);
}

}  // namespace satrap
