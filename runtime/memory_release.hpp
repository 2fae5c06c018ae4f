// Giving the memory of a finished job back to the system. glibc's malloc keeps what is freed in
// its arenas for reuse (one arena per allocating thread, up to 8 per core): after a job, a node
// held some 35 MB free in two arenas of CAF worker threads (malloc_stats: 46.8 MB from the
// system, 9.6 MB in use), and its resident size crept up job after job as the reuse landed on
// other pages, though nothing leaked. memory_release() (malloc_trim(0): the free pages of every
// arena go back) is called when a job's actors are gone from a process: on a node when the last
// actor it spawned for jobs has stopped, on the head when a job's supervisor has stopped.
// Each call logs `memory_released` with the process's figures before and after, which is how a
// real leak (heap_in_use growing job after job) is told from allocator retention (heap_free).
// Threading: any thread; malloc_trim locks each arena in turn (a few ms for a heap of 100 MB).
#pragma once

#include "models/env.hpp"

#include <cstdint>
#include <string_view>

namespace satrap {

struct memory_figures {
  int64_t rss_bytes = 0;     // resident (/proc/self/statm)
  int64_t in_use_bytes = 0;  // malloc's blocks in use (mallinfo2: uordblks + hblkhd)
  int64_t free_bytes = 0;    // free inside malloc's arenas (fordblks): what a trim may give back
};

memory_figures memory_figures_now();

// malloc_trim(0), logged with `why` and its duration on e's clock; returns the figures after.
memory_figures memory_release(std::string_view why, env& e = default_env());

}  // namespace satrap
