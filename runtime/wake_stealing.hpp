// wake_stealing: satrap's CAF scheduler policy, work stealing whose idle workers are woken when
// work waits for them, instead of finding it on their next poll.
//
// Why: CAF 0.17's work_stealing puts a message's receiver on the sending worker's own queue
// (internal_enqueue) and never tells the other workers. An idle worker finds that work only by
// polling: 50 us naps (about 100 us on Linux, with timer slack) and then 1 ms sleeps on its
// condition variable. In satrap's pipeline the actors hand work to each other every few tens of
// microseconds, so the second core sat idle 11% of a training run, almost all of it in naps of
// 60-200 us while runnable actors waited on the other worker's queue (perf sched_switch trace,
// tests/bench/README.md, pipeline_overhead).
//
// What it does:
// - A worker that ran out of jobs polls for `spin` (its own queue, then every other queue's
//   tail, yielding the core between polls; a `spin` of 0 looks once), then parks on its condition variable for at most
//   `park`, counted in the coordinator's `parked`. After a park that timed out it only looks
//   once and parks again: an idle process costs one look per worker per `park`.
// - Whoever enqueues a job (an actor sending from a worker, a non-worker thread, an actor that
//   used up its throughput) wakes one parked worker when there is one: the job is then run by
//   whichever worker gets to it first, the sender after its handler or the woken one by stealing.
// - No lost wake-up: a parker counts itself parked and then looks at every queue before it waits;
//   an enqueuer publishes its job and then reads the count, both with full fences between.
//
// Threading: every member is used by the coordinator's worker threads and by threads that enqueue
// from outside (the middleman, the clock); the queues lock themselves, `parked` is atomic, and
// each worker's wait state is guarded by its own mutex.
#pragma once

#include <caf/config_option_set.hpp>
#include <caf/detail/double_ended_queue.hpp>
#include <caf/policy/unprofiled.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>
#include <caf/timespan.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

namespace satrap {

// An idle worker polls this long before it parks. Long enough to bridge the gaps between one
// actor's message and the next in a training step (tens of microseconds), so a worker is seldom
// parked and woken (a futex call each, ~10-50 us on a VM); short enough that an idle node burns
// little. Measured on the default job (tests/bench/README.md, pipeline_overhead).
inline constexpr std::chrono::microseconds default_spin{100};
// A parked worker looks at the queues again after this even when nobody woke it: the safety net
// under the wake-ups, and what an idle process pays (one look per worker per park; CAF's own
// relaxed sleep is the same 10 ms, satrap set 1 ms under CAF's policy, whose sleepers were woken
// only for work from outside the workers).
inline constexpr std::chrono::milliseconds default_park{10};

// Declares the knobs `satrap.scheduler-spin` and `satrap.scheduler-park` (timespans) in a config's
// options (CAF's `set` refuses undeclared names); a config without them gets the defaults above.
void add_scheduler_options(caf::config_option_set& options);

class wake_stealing : public caf::policy::unprofiled {
 public:
  using clock = std::chrono::steady_clock;
  using queue_type = caf::detail::double_ended_queue<caf::resumable>;

  struct coordinator_data {
    explicit coordinator_data(caf::scheduler::abstract_coordinator*) {}
    std::atomic<size_t> next_worker{0};  // round robin for jobs from outside the workers
    std::atomic<int> parked{0};          // workers waiting on their condition variable
  };

  struct worker_data {
    // The knobs, from the system's config: `satrap.scheduler-spin` and `satrap.scheduler-park`.
    explicit worker_data(caf::scheduler::abstract_coordinator* parent);
    worker_data(const worker_data& other);  // the knobs; a fresh queue and wait state

    queue_type queue;
    caf::timespan spin{};   // polling before parking
    caf::timespan park{};   // parked at most this long between looks at the queues
    size_t steal_from = 0;  // where this worker's next steal starts, moved on by each steal
    std::mutex lock;
    std::condition_variable cv;
    bool waiting = false;  // guarded by lock: parked on cv
    bool woken = false;    // guarded by lock: someone has work for it
  };

  template <class Coordinator>
  void central_enqueue(Coordinator* self, caf::resumable* job) {
    auto n = self->num_workers();
    auto w = self->worker_by_id(self->data().next_worker++ % n);
    w->external_enqueue(job);
  }

  template <class Worker>
  void external_enqueue(Worker* self, caf::resumable* job) {
    self->data().queue.append(job);
    wake_one(self->parent(), self, true);
  }

  template <class Worker>
  void internal_enqueue(Worker* self, caf::resumable* job) {
    self->data().queue.prepend(job);
    wake_one(self->parent(), self, false);
  }

  template <class Worker>
  void resume_job_later(Worker* self, caf::resumable* job) {
    self->data().queue.append(job);
    wake_one(self->parent(), self, false);
  }

  template <class Worker>
  caf::resumable* dequeue(Worker* self) {
    auto& d = self->data();
    bool poll = true;  // after a job or a wake-up; not after a park that timed out (an idle node)
    for (;;) {
      // The real clock, not the env (models/env.hpp): this is the scheduler's spin before a park,
      // read every 8 yields in the hottest idle loop of every worker; a virtual call per read
      // would lengthen the spin, and simulated time has no meaning for a real thread's spin.
      auto until = clock::now() + d.spin;
      for (size_t i = 1; poll; ++i) {
        if (auto* job = find_job(self))
          return job;
        if (d.spin.count() == 0)  // no polling: one look, then park
          break;
        // Yield, not pause: a thread of this process outside the scheduler (the batch split's
        // helpers, models/dense/batch_split.hpp) may be waiting for this core. With a pause loop
        // the Kaggle-shape job (split over 2 threads) ran 4-6% slower than under CAF's policy.
        std::this_thread::yield();
        if (i % 8 == 0 && clock::now() >= until)
          break;
      }
      bool woken = false;
      if (auto* job = park(self, woken))
        return job;
      poll = woken;  // woken, but another worker took the job first
    }
  }

  template <class Worker, class UnaryFunction>
  void foreach_resumable(Worker* self, UnaryFunction f) {
    for (auto* job = self->data().queue.take_head(); job != nullptr;
         job = self->data().queue.take_head())
      f(job);
  }

  template <class Coordinator, class UnaryFunction>
  void foreach_central_resumable(Coordinator*, UnaryFunction) {}

 private:
  // Its own queue's head, else the oldest job of another worker's queue.
  template <class Worker>
  caf::resumable* find_job(Worker* self) {
    auto& d = self->data();
    if (auto* job = d.queue.take_head())
      return job;
    auto* parent = self->parent();
    auto n = parent->num_workers();
    for (size_t k = 0; k + 1 < n; ++k) {
      auto victim = (self->id() + 1 + (d.steal_from + k) % (n - 1)) % n;  // never itself
      auto& q = parent->worker_by_id(victim)->data().queue;
      if (q.empty())  // lock-free look first: no spinlock contention with a busy owner
        continue;
      if (auto* job = q.take_tail()) {
        ++d.steal_from;
        return job;
      }
    }
    return nullptr;
  }

  // Parks until woken or `park` passes; a job found on the way in or out, or nullptr. `woken`:
  // whether someone woke it (else the park timed out or a job was there on the way in).
  template <class Worker>
  caf::resumable* park(Worker* self, bool& woken) {
    auto& d = self->data();
    auto& parked = self->parent()->data().parked;
    {
      std::unique_lock<std::mutex> guard(d.lock);
      d.waiting = true;
      d.woken = false;
    }
    parked.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    caf::resumable* job = find_job(self);  // work published before we counted ourselves
    if (job == nullptr) {
      std::unique_lock<std::mutex> guard(d.lock);
      d.cv.wait_for(guard, d.park, [&] { return d.woken; });
    }
    {
      std::unique_lock<std::mutex> guard(d.lock);
      d.waiting = false;
      woken = d.woken;
    }
    parked.fetch_sub(1, std::memory_order_seq_cst);
    return job != nullptr ? job : find_job(self);
  }

  // Wakes one parked worker (the enqueuing one excluded unless `self_too`: a job from outside
  // may land on a parked worker's own queue).
  template <class Coordinator, class Worker>
  void wake_one(Coordinator* parent, Worker* self, bool self_too) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (parent->data().parked.load(std::memory_order_seq_cst) == 0)
      return;
    auto n = parent->num_workers();
    for (size_t k = 0; k < n; ++k) {
      auto id = (self->id() + (self_too ? 0 : 1) + k) % n;
      if (!self_too && id == self->id())
        continue;
      auto& d = parent->worker_by_id(id)->data();
      std::unique_lock<std::mutex> guard(d.lock);
      if (d.waiting && !d.woken) {
        d.woken = true;
        d.cv.notify_one();
        return;
      }
    }
  }
};

}  // namespace satrap
