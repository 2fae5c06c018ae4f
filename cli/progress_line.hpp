// The one-line progress of a training job, rewritten in place on a terminal (stderr): the same
// line for `satrap train` and `satrap submit --follow`.
#pragma once

#include "actors/job_supervisor/job_supervisor.hpp"

#include <cstdio>

namespace satrap {

inline void print_progress_line(const job_progress& p) {
  std::fprintf(stderr, "\r  step %lld/%lld  samples %lld  %.0f samples/s  loss %.4f  auc %.4f   ",
               static_cast<long long>(p.steps), static_cast<long long>(p.steps_total),
               static_cast<long long>(p.samples), p.samples_per_sec, p.loss, p.running_auc);
  std::fflush(stderr);
}

}  // namespace satrap
