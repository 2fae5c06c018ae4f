// The status endpoint of an embedded job (`satrap train --status-port P`): the dashboard at /
// and a /status JSON of the same shape as the head's (actors/admin/admin_render.cpp), with one
// node ("local", this process), the job's actors and their messages/s, and the one job with its
// progress history. Read-only: an embedded job has no admin token, so POSTs are refused (stop
// the job with Ctrl-C).
// Threading: on_* are called from the job supervisor (its observer) and the main thread,
// render from the HTTP server's workers; a mutex guards the state.
#pragma once

#include "actors/admin/admin.hpp"
#include "runtime/http_server.hpp"
#include "runtime/job_history.hpp"
#include "spec/job_spec.hpp"

#include <chrono>
#include <map>
#include <mutex>
#include <string>

namespace satrap {

class embedded_status {
 public:
  embedded_status(const job_spec& spec, std::string version);

  void on_progress(const job_progress& p);
  void on_end(job_state state, const std::string& message, const job_result* r);

  std::string render_status();
  http_response handle(const http_request& req);

 private:
  std::mutex mu_;
  std::string version_;
  job_record job_;
  job_history history_;
  std::chrono::steady_clock::time_point started_;
  // messages/s: counters of the previous sample, refreshed at most once a second.
  std::chrono::steady_clock::time_point sampled_;
  std::map<std::string, int64_t> messages_;  // by role/index
  std::map<std::string, double> rates_;
};

}  // namespace satrap
