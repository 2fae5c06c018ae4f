// The recovery state machine, driven by hand: stale failures, the restart intensity, replayed
// batches (late `applied` messages of a rolled-back generation included), lost nodes.
#include "actors/job_supervisor/recovery.hpp"

#include <doctest/doctest.h>

using namespace satrap;
using namespace std::chrono_literals;

namespace {
const recovery::time_point t0{};
}

TEST_CASE("recovery: a restart rolls back to the checkpoint and counts replayed batches") {
  recovery r;
  r.configure(3, 60s);
  r.start(2, 10);
  CHECK(r.on_applied(1, 1, 14, 0) == 0);  // steps 10..14 applied on rank 0
  CHECK(r.on_applied(1, 1, 11, 1) == 0);
  auto d = r.on_failure(1, 1, true, "boom", t0, 10);
  CHECK(d.what == recovery::action::restart);
  CHECK(d.replayed == 5 + 2);
  CHECK(r.recovering());
  CHECK(r.failures() == std::vector<std::string>{"boom"});
  // A step applied before the failure, reported after it: rolled back too.
  CHECK(r.on_applied(1, 2, 15, 0) == 1);
  CHECK(r.on_applied(1, 2, 13, 0) == 0);  // already counted
  // While recovering, other failures are ignored; then a new generation starts.
  CHECK(r.on_failure(2, 2, true, "again", t0, 10).what == recovery::action::ignore);
  r.launched();
  r.start(2, 10);
  CHECK(r.on_applied(3, 3, 10, 0) == 0);
  CHECK(r.on_failure(3, 3, true, "third", t0 + 1s, 10).replayed == 1);
}

TEST_CASE("recovery: stale, not running, and after training") {
  recovery r;
  r.configure(3, 60s);
  r.start(1, 0);
  CHECK(r.on_failure(1, 2, true, "old", t0, 0).what == recovery::action::ignore);
  CHECK(r.on_failure(2, 2, false, "no job", t0, 0).what == recovery::action::ignore);
  r.finishing();
  CHECK(r.on_failure(2, 2, true, "late", t0, 0).what == recovery::action::after_training);
  CHECK(r.failures().empty());
}

TEST_CASE("recovery: past the restart intensity it gives up") {
  recovery r;
  r.configure(1, 60s);
  r.start(1, 0);
  CHECK(r.on_failure(1, 1, true, "one", t0, 0).what == recovery::action::restart);
  r.launched();
  r.start(1, 0);
  CHECK(r.on_failure(2, 2, true, "two", t0 + 1s, 0).what == recovery::action::give_up);
  CHECK(r.failures().size() == 2);
  recovery later;
  later.configure(1, 60s);
  later.start(1, 0);
  CHECK(later.on_failure(1, 1, true, "one", t0, 0).what == recovery::action::restart);
  later.launched();
  CHECK(later.on_failure(2, 2, true, "two", t0 + 61s, 0).what == recovery::action::restart);
}

TEST_CASE("recovery: lost nodes") {
  recovery r;
  r.node_lost("b");
  CHECK(r.is_lost("b"));
  CHECK_FALSE(r.is_lost("a"));
  r.node_back("b");
  CHECK_FALSE(r.is_lost("b"));
}
