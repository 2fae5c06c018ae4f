// The double-buffer state machine of cuda_dense_model's staged uploads (models/cuda/staging_ring.hpp):
// plain C++, so it runs on machines without a GPU. The trainer's pattern is: stage step N, stage
// N+1 while N computes, finish N, stage N+2 while N+1 computes, ...
#include "models/cuda/staging_ring.hpp"

#include <doctest/doctest.h>

using satrap::staging_ring;
using slot_state = staging_ring::slot_state;

TEST_CASE("staging_ring: double buffering in the trainer's order") {
  staging_ring r(2);
  CHECK(r.free_slots() == 2);
  auto a = r.stage(0);
  REQUIRE(a.has_value());
  CHECK(r.state(*a) == slot_state::staged);
  CHECK(r.begin_compute(0) == *a);
  CHECK(r.computing());
  // Batch 1 uploads while batch 0 computes.
  auto b = r.stage(1);
  REQUIRE(b.has_value());
  CHECK(*b != *a);
  CHECK(r.free_slots() == 0);
  CHECK_FALSE(r.stage(2).has_value());  // no third buffer: batch 2 waits
  r.finish();
  CHECK(r.state(*a) == slot_state::free);
  CHECK(r.begin_compute(1) == *b);
  auto c = r.stage(2);
  REQUIRE(c.has_value());
  CHECK(*c == *a);  // the freed slot is reused
  r.finish();
  CHECK(r.find(2) == c);
  CHECK(r.begin_compute(2) == *c);
  r.finish();
  CHECK(r.free_slots() == 2);
  CHECK_FALSE(r.computing());
}

TEST_CASE("staging_ring: find sees staged slots only") {
  staging_ring r(2);
  r.stage(5);
  CHECK(r.has(5));
  CHECK_FALSE(r.has(6));
  r.begin_compute(5);
  CHECK_FALSE(r.has(5));  // computing, no longer staged
  CHECK(r.key(0) == 5);
}

TEST_CASE("staging_ring: drop_before frees stale staged batches, never the computing one") {
  staging_ring r(3);
  r.stage(3);
  r.begin_compute(3);
  r.stage(4);
  r.stage(9);
  CHECK(r.drop_before(9) == 1);  // 4 dropped; 3 computes on; 9 kept
  CHECK_FALSE(r.has(4));
  CHECK(r.has(9));
  CHECK(r.computing());
  CHECK(r.free_slots() == 1);
  r.finish();
  CHECK(r.free_slots() == 2);
}

TEST_CASE("staging_ring: clear after an error frees everything") {
  staging_ring r(2);
  r.stage(0);
  r.begin_compute(0);
  r.stage(1);
  r.clear();
  CHECK(r.free_slots() == 2);
  CHECK_FALSE(r.computing());
  CHECK_FALSE(r.has(1));
  // Usable again from scratch.
  CHECK(r.stage(1).has_value());
  CHECK(r.begin_compute(1) >= 0);
}

TEST_CASE("staging_ring: one slot degrades to staging then computing in turn") {
  staging_ring r(1);
  r.stage(0);
  r.begin_compute(0);
  CHECK_FALSE(r.stage(1).has_value());
  r.finish();
  CHECK(r.stage(1).has_value());
}
