// The checkpoint cut state machine, driven by hand: which cuts write checkpoints, what a
// checkpoint commits, full and incremental, holds, timers, on-demand callers and rollbacks.
#include "actors/job_supervisor/checkpoint_cut.hpp"

#include <doctest/doctest.h>

using namespace satrap;

namespace {

cut_report report(int32_t rank, int64_t step, int64_t samples, std::vector<double> losses) {
  cut_report r;
  r.rank = rank;
  r.step = step;
  r.samples = samples;
  r.step_losses = std::move(losses);
  return r;
}

checkpoint_cut make_cut(std::string dir = "ckpt", int64_t every = 10, int32_t full_every = 2) {
  checkpoint_cut c;
  c.configure({std::move(dir), every, full_every, 100});
  return c;
}

}  // namespace

TEST_CASE("checkpoint_cut: periodic cuts, and none without a folder") {
  auto c = make_cut();
  CHECK(c.next_periodic(0) == 10);
  CHECK(c.next_periodic(10) == 20);
  CHECK(c.next_periodic(95) == -1);  // not at or past the last step
  auto none = make_cut("");
  CHECK_FALSE(none.enabled());
  CHECK(none.next_periodic(0) == -1);
}

TEST_CASE("checkpoint_cut: the cut completes once every trainer reported, repeats are ignored") {
  auto c = make_cut();
  c.release(10);
  CHECK_FALSE(c.on_report(report(0, 10, 100, {1.0, 2.0}), 2, false));
  CHECK_FALSE(c.on_report(report(0, 10, 100, {1.0, 2.0}), 2, false));  // a repeat
  CHECK_FALSE(c.on_report(report(1, 20, 100, {1.0, 2.0}), 2, false));  // another cut
  auto done = c.on_report(report(1, 10, 50, {0.5, 0.25}), 2, false);
  REQUIRE(done);
  CHECK(done->step == 10);
  CHECK(done->samples == 150);
  CHECK(done->loss_sum == doctest::Approx(3.75));
  CHECK(done->checkpoint);  // periodic
  CHECK(c.checkpointing());
  CHECK(c.pending_samples() == 150);
  CHECK(c.pending_losses() == std::vector<double>{1.5, 2.25});
}

TEST_CASE("checkpoint_cut: a checkpoint commits what is pending, every full_every-th is full") {
  auto c = make_cut();
  c.release(10);
  REQUIRE(c.on_report(report(0, 10, 100, {1.0}), 1, false));
  auto m1 = c.plan("job", 1, 2);
  CHECK(m1.sequence == 1);
  CHECK(m1.step == 10);
  CHECK(m1.full);
  CHECK(m1.samples == 100);
  c.committed(m1);
  CHECK(c.last()->sequence == 1);
  CHECK(c.pending_samples() == 0);
  CHECK(c.committed_samples() == 100);
  c.release(20);
  REQUIRE(c.on_report(report(0, 20, 100, {2.0}), 1, false));
  auto m2 = c.plan("job", 1, 2);
  CHECK(m2.sequence == 2);
  CHECK_FALSE(m2.full);  // incremental on 1
  CHECK(m2.step_losses == std::vector<double>{1.0, 2.0});
  c.committed(m2);
  c.release(30);
  REQUIRE(c.on_report(report(0, 30, 100, {3.0}), 1, false));
  CHECK(c.plan("job", 1, 2).full);  // full_every 2
}

TEST_CASE("checkpoint_cut: a best-model snapshot takes a sequence and makes the next one full") {
  auto c = make_cut("ckpt", 10, 100);
  c.release(10);
  REQUIRE(c.on_report(report(0, 10, 1, {}), 1, false));
  c.committed(c.plan("job", 1, 1));
  CHECK(c.reserve_snapshot_sequence() == 2);
  c.snapshot_taken();
  c.release(20);
  REQUIRE(c.on_report(report(0, 20, 1, {}), 1, false));
  auto m = c.plan("job", 1, 1);
  CHECK(m.sequence == 3);
  CHECK(m.full);
}

TEST_CASE("checkpoint_cut: a validation cut writes nothing unless a checkpoint is wanted") {
  auto c = make_cut("ckpt", 0);
  c.release(7);
  auto plain = c.on_report(report(0, 7, 1, {}), 1, false);
  REQUIRE(plain);
  CHECK_FALSE(plain->checkpoint);
  c.release(9);
  auto asked = c.on_report(report(0, 9, 1, {}), 1, true);  // an on-demand caller waits
  REQUIRE(asked);
  CHECK(asked->checkpoint);
}

TEST_CASE("checkpoint_cut: timers and on-demand requests begin one hold at a time") {
  auto c = make_cut();
  c.release(10);
  CHECK(c.on_demand(1));
  c.begin_hold();
  CHECK_FALSE(c.on_demand(2));  // answered by the one under way
  CHECK_FALSE(c.on_timer());
  auto held = c.on_held(14);
  CHECK_FALSE(held.finishing);
  CHECK(held.cut == 14);
  auto done = c.on_report(report(0, 14, 1, {}), 1, false);
  REQUIRE(done);
  CHECK(done->checkpoint);  // wanted, though not periodic
  c.release(20);
  CHECK(c.on_timer());
}

TEST_CASE("checkpoint_cut: a hold past the last step sends the trainers back to their cut") {
  auto c = make_cut();
  c.release(100);
  CHECK(c.on_timer());
  c.begin_hold();
  auto held = c.on_held(100);
  CHECK(held.finishing);
  CHECK(held.cut == 100);
  CHECK_FALSE(c.checkpointing());
  auto done = c.on_report(report(0, 100, 1, {}), 1, false);
  REQUIRE(done);
  CHECK_FALSE(done->checkpoint);  // the timed wish is dropped
}

TEST_CASE("checkpoint_cut: a rollback drops what is pending, resume continues the chain") {
  auto c = make_cut();
  checkpoint_meta m;
  m.sequence = 4;
  m.step = 40;
  m.samples = 400;
  m.step_losses = {1, 2, 3};
  c.resume_from(m);
  CHECK(c.resume_step() == 40);
  CHECK(c.committed_samples() == 400);
  c.release(50);
  REQUIRE(c.on_report(report(0, 50, 10, {9}), 1, false));
  c.end();
  c.roll_back();
  CHECK(c.pending_samples() == 0);
  CHECK(c.pending_losses().empty());
  CHECK_FALSE(c.ending());
  CHECK(c.plan("job", 1, 1).sequence == 5);
}
