// The device all-reduce's control flow (actors/dense_trainer/device_allreduce.hpp) on the CPU, with
// a fake communicator: the id made by rank 0 and carried to the others, non-blocking joins and
// all-reduces polled to completion, generations (stale ids dropped, a newer one aborting the
// current communicator), and a peer lost mid-step (abort, no hang, a new generation works).
#include "actors/dense_trainer/device_allreduce.hpp"
#include "runtime/error.hpp"

#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <random>
#include <vector>

using namespace satrap;

namespace {

// The shared side of the fake: one group per unique id. A join completes once every rank joined;
// an all-reduce completes once every rank started it (then each rank's buffer holds the sum). An
// aborted member fails the group's pending and later all-reduces, as NCCL reports a lost peer.
struct fake_fabric {
  struct group {
    int32_t world = 0;
    std::map<int32_t, float*> joined;
    std::map<int32_t, std::pair<float*, size_t>> started;
    std::vector<float> sum;  // of the current round, once everyone started
    bool complete = false;   // everyone started the current round
    bool broken = false;
  };
  std::map<std::string, group> groups;
  int ids = 0;
  int aborts = 0;
  int joins = 0;
};

class fake_comm final : public device_comm {
 public:
  fake_comm(fake_fabric& f, std::string id, int32_t rank)
      : f_(f), id_(std::move(id)), rank_(rank) {}
  ~fake_comm() override { abort(); }

  caf::expected<bool> joined() override {
    auto& g = f_.groups.at(id_);
    return static_cast<int32_t>(g.joined.size()) == g.world;
  }
  caf::error all_reduce_start(float* values, size_t n) override {
    auto& g = f_.groups.at(id_);
    g.started[rank_] = {values, n};
    if (static_cast<int32_t>(g.started.size()) == g.world) {
      g.complete = true;
      g.sum.assign(n, 0.0f);
      for (auto& [r, v] : g.started)
        for (size_t i = 0; i < n; ++i)
          g.sum[i] += v.first[i];
    }
    return caf::none;
  }
  caf::expected<bool> all_reduce_done() override {
    auto& g = f_.groups.at(id_);
    if (g.broken || aborted_)
      return make_error(errc::peer_failure, "fake NCCL: a peer aborted");
    if (!g.complete || !g.started.count(rank_))
      return false;
    auto values = g.started.at(rank_).first;
    std::copy(g.sum.begin(), g.sum.end(), values);
    g.started.erase(rank_);  // this rank's part of the round is over
    if (g.started.empty())
      g.complete = false;
    return true;
  }
  void abort() override {
    if (aborted_)
      return;
    aborted_ = true;
    ++f_.aborts;
    f_.groups.at(id_).broken = true;
  }

 private:
  fake_fabric& f_;
  std::string id_;
  int32_t rank_;
  bool aborted_ = false;
};

device_comm_factory fake_factory(fake_fabric& f) {
  device_comm_factory factory;
  factory.make_id = [&f]() -> caf::expected<std::string> {
    return "fake-id-" + std::to_string(++f.ids);
  };
  factory.join = [&f](const std::string& id, int32_t world,
                      int32_t rank) -> caf::expected<std::unique_ptr<device_comm>> {
    auto& g = f.groups[id];
    g.world = world;
    g.joined[rank] = nullptr;
    ++f.joins;
    return std::unique_ptr<device_comm>(std::make_unique<fake_comm>(f, id, rank));
  };
  return factory;
}

// One generation: rank 0 opens it, the id travels to the other ranks (in a seeded order, with the
// join polled in between), then `steps` all-reduces, each polled in a seeded order until done.
void run_generation(std::vector<device_allreduce>& ranks, uint64_t generation, int steps,
                    std::mt19937_64& rng) {
  const auto world = static_cast<int32_t>(ranks.size());
  auto id = ranks[0].open(generation);
  REQUIRE(id);
  std::vector<int32_t> order;
  for (int32_t r = 1; r < world; ++r)
    order.push_back(r);
  std::shuffle(order.begin(), order.end(), rng);
  for (auto r : order) {
    CHECK(*ranks[0].ready() == false);  // not everyone joined yet
    auto joined = ranks[static_cast<size_t>(r)].on_id(generation, *id);
    REQUIRE(joined);
    CHECK(*joined);
  }
  for (auto& a : ranks) {
    CHECK(*a.ready());
    CHECK(a.generation() == generation);
  }
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    std::vector<std::vector<float>> values(static_cast<size_t>(world));
    std::vector<float> want(5, 0.0f);
    for (int32_t r = 0; r < world; ++r) {
      for (int i = 0; i < 5; ++i)
        values[static_cast<size_t>(r)].push_back(static_cast<float>(r * 10 + i + step));
      for (int i = 0; i < 5; ++i)
        want[static_cast<size_t>(i)] += values[static_cast<size_t>(r)][static_cast<size_t>(i)];
    }
    std::vector<int32_t> starts(static_cast<size_t>(world));
    for (int32_t r = 0; r < world; ++r)
      starts[static_cast<size_t>(r)] = r;
    std::shuffle(starts.begin(), starts.end(), rng);
    for (size_t k = 0; k < starts.size(); ++k) {
      auto r = static_cast<size_t>(starts[k]);
      REQUIRE(!ranks[r].start(values[r].data(), 5));
      CHECK(ranks[r].active());
      if (k + 1 < starts.size())  // someone has not started: nobody is done
        CHECK(*ranks[static_cast<size_t>(starts[0])].done() == false);
    }
    for (auto r : starts) {
      auto done = ranks[static_cast<size_t>(r)].done();
      REQUIRE(done);
      CHECK(*done);
      CHECK_FALSE(ranks[static_cast<size_t>(r)].active());
      CHECK(values[static_cast<size_t>(r)] == want);
    }
  }
}

}  // namespace

TEST_CASE("device all-reduce: rank 0's id reaches every rank, joins are polled, sums are right") {
  const uint64_t seed = 20261201;
  INFO("seed=" << seed);
  std::mt19937_64 rng(seed);
  for (int32_t world : {2, 3, 5}) {
    CAPTURE(world);
    fake_fabric fabric;
    std::vector<device_allreduce> ranks;
    for (int32_t r = 0; r < world; ++r)
      ranks.emplace_back(r, world, fake_factory(fabric));
    CHECK(*ranks[1].ready() == false);  // no id yet
    run_generation(ranks, 1, 3, rng);
    CHECK(fabric.ids == 1);
    CHECK(fabric.joins == world);
    CHECK(fabric.aborts == 0);
  }
}

TEST_CASE(
  "device all-reduce: stale ids are dropped, a newer generation aborts the old communicator") {
  std::mt19937_64 rng(7);
  fake_fabric fabric;
  std::vector<device_allreduce> ranks;
  for (int32_t r = 0; r < 3; ++r)
    ranks.emplace_back(r, 3, fake_factory(fabric));
  run_generation(ranks, 2, 1, rng);
  // A late id of generation 1 (or 2 again) changes nothing.
  auto stale = ranks[1].on_id(1, "fake-id-old");
  REQUIRE(stale);
  CHECK_FALSE(*stale);
  CHECK(*ranks[2].on_id(2, "fake-id-1") == false);
  CHECK(ranks[1].generation() == 2);
  CHECK(fabric.aborts == 0);
  // Rank 0 cannot reopen an old generation.
  CHECK_FALSE(ranks[0].open(2));
  // Generation 3: every old communicator is aborted before the new one is joined.
  run_generation(ranks, 3, 2, rng);
  CHECK(fabric.aborts == 3);
  CHECK(fabric.ids == 2);
}

TEST_CASE("device all-reduce: a rank lost mid-step fails its peers' polls instead of hanging") {
  std::mt19937_64 rng(11);
  fake_fabric fabric;
  std::vector<device_allreduce> ranks;
  for (int32_t r = 0; r < 3; ++r)
    ranks.emplace_back(r, 3, fake_factory(fabric));
  run_generation(ranks, 1, 1, rng);
  std::vector<float> v0(4, 1.0f), v1(4, 2.0f);
  REQUIRE(!ranks[0].start(v0.data(), 4));
  REQUIRE(!ranks[1].start(v1.data(), 4));
  CHECK(*ranks[0].done() == false);  // rank 2 has not started: still waiting, not blocked
  ranks[2].abort();                  // rank 2 is lost (its trainer killed: the state aborts)
  CHECK_FALSE(ranks[2].has_comm());
  auto failed = ranks[0].done();
  REQUIRE_FALSE(failed);
  CHECK(error_text(failed.error()).find("a peer aborted") != std::string::npos);
  // Recovery: a new generation with new communicators trains on.
  run_generation(ranks, 2, 2, rng);
  CHECK(fabric.aborts == 3);
}

TEST_CASE("device all-reduce: destroying a trainer's state aborts its communicator") {
  fake_fabric fabric;
  {
    device_allreduce rank0(0, 2, fake_factory(fabric));
    REQUIRE(rank0.open(1));
    CHECK(fabric.aborts == 0);
  }
  CHECK(fabric.aborts == 1);
}
