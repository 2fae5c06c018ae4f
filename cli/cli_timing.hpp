// The CLI's timeouts and polling intervals, by name, with default, unit and why (the CLI-side
// group beside spec/knobs.hpp's cluster_timing and job_timing). Whole milliseconds; `ms()`
// (spec/knobs.hpp) gives a std::chrono duration. Not in any file format: a command's flag
// (--wait, --period, ...) overrides the few a user may want to change.
// Threading: plain constants.
#pragma once

#include "spec/knobs.hpp"

#include <cstdint>

namespace satrap::cli_timing {

// ---- the admin's HTTP endpoint (head, and `satrap train --status-port`) ----
// A /status, /metrics or /readyz answer from the admin. Short: the page polls every second, and
// an admin that does not answer in this is reported as 503.
inline constexpr int64_t status_request_ms = 5000;
// A cancel from the dashboard: the admin answers at once (the job's actors end behind it).
inline constexpr int64_t cancel_request_ms = 10000;
// A checkpoint from the dashboard: the running job writes one first (every shard's snapshot).
inline constexpr int64_t checkpoint_request_ms = 60000;

// ---- cluster clients (`satrap submit/jobs/cancel/checkpoint`, the per-host supervisor) ----
// Any request to the head's admin from a client command.
inline constexpr int64_t client_request_ms = 30000;
// `satrap submit --wait` (and `satrap job`) polls the job's state this often.
inline constexpr int64_t job_poll_ms = 500;
// The per-host supervisor telling the head it gave up on a node.
inline constexpr int64_t gave_up_request_ms = 5000;

// ---- CAF's middleman in cluster processes ----
// Heartbeats on each CAF connection; a silent peer is dropped after connection_timeout_ms.
inline constexpr int64_t middleman_heartbeat_ms = 1000;
inline constexpr int64_t middleman_connection_timeout_ms = 5000;

// ---- stopping processes (`satrap up` on failure, `satrap down`, `satrap supervise`) ----
// A supervisor (or head) sent SIGTERM gets this long to stop its nodes and exit.
inline constexpr int64_t supervisor_stop_ms = 15000;
// Processes sent SIGTERM get this long before SIGKILL (`satrap down`, a supervisor's nodes).
inline constexpr int64_t process_stop_ms = 10000;
// How often a stopping process is checked for having exited.
inline constexpr int64_t exit_poll_ms = 50;
// `satrap down`: how often the cluster's processes are checked (many, so less often).
inline constexpr int64_t down_poll_ms = 100;
// `satrap up`: how often /readyz is asked while the nodes join, and its HTTP timeout.
inline constexpr int64_t ready_poll_ms = 250;
inline constexpr int64_t ready_request_ms = 1000;

// ---- long-running commands' main loops ----
// `satrap node`: how often it looks whether its link to the head gave up, between signals.
inline constexpr int64_t node_poll_ms = 200;
// `satrap supervise`: how often it reaps and restarts nodes, between signals.
inline constexpr int64_t supervise_poll_ms = 50;
// `satrap serve`: how often it looks for a stop signal.
inline constexpr int64_t serve_poll_ms = 100;

}  // namespace satrap::cli_timing
