// process_record: the pid files of `satrap up`, which `satrap down` trusts only as far as they
// still describe the process that up started.
//
// A record holds the pid, the process's start time (field 22 of /proc/PID/stat, clock ticks since
// boot: fixed at fork, so a reused pid has another) and its command line (the argv up gave it).
// A process matches its record only when both still agree; a stale or forged file never makes
// `satrap down` signal anything.
// Threading: plain functions.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace satrap {

// Writes `path` for `pid`, started with `argv`; false when the process is already gone.
bool process_record_write(const std::string& path, pid_t pid, const std::vector<std::string>& argv);

// The pid of `path` when that process is alive and still the one recorded, else 0.
pid_t process_record_live(const std::string& path);

// The real path of this satrap executable (what /proc/self/exe points to), for starting cluster
// processes under their own name: exec'd through /proc/self/exe they were all named "exe" and
// `pgrep -x satrap` found none. "/proc/self/exe" when the binary was replaced or removed since.
// Call before fork (it allocates).
std::string satrap_executable();

// Forks and execs this satrap binary (satrap_executable) with `args` (argv[0] first): stdin from
// /dev/null, stdout and stderr appended to `log`, no signal blocked. `new_session`: in a session of
// its own (detached from this terminal, as `up` leaves the cluster behind). `env`: "NAME=value"
// added to this environment, replacing NAME ("": the environment as it is). Returns the pid.
pid_t satrap_start(const std::vector<std::string>& args, const std::string& log, bool new_session,
                   const std::string& env = "");

// Whether `host` names this machine: a loopback address, localhost, its host name or an address
// of one of its interfaces (in this network namespace).
bool host_is_local(const std::string& host);

}  // namespace satrap
