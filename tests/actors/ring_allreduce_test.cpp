// The ring all-reduce state machine, driven by hand: sums are right and bit-identical on every rank.
#include "actors/dense_trainer/ring_allreduce.hpp"
#include "runtime/error.hpp"

#include <doctest/doctest.h>

#include <deque>
#include <random>

using namespace satrap;

namespace {

// Runs one all-reduce among `world` replicas, delivering messages in a seeded random order
// across links (in order along each link, as CAF does).
std::vector<std::vector<float>> reduce(int world, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> values(static_cast<size_t>(world), std::vector<float>(n));
  for (auto& v : values)
    for (auto& x : v)
      x = normal(rng);
  std::vector<ring_allreduce> rings;
  std::vector<std::deque<capnp_payload>> links(static_cast<size_t>(world));  // into rank r
  for (int r = 0; r < world; ++r)
    rings.emplace_back(r, world);
  for (int r = 0; r < world; ++r)
    links[static_cast<size_t>((r + 1) % world)].push_back(
      rings[static_cast<size_t>(r)].start(3, values[static_cast<size_t>(r)]));
  for (;;) {
    std::vector<size_t> ready;
    for (size_t r = 0; r < links.size(); ++r)
      if (!links[r].empty())
        ready.push_back(r);
    if (ready.empty())
      break;
    auto r = ready[rng() % ready.size()];
    capnp_payload out;
    auto more = rings[r].receive(links[r].front(), out);
    REQUIRE(more);
    if (*more)
      links[(r + 1) % links.size()].push_back(std::move(out));
    links[r].pop_front();
  }
  for (auto& ring : rings)
    CHECK(!ring.active());
  return values;
}

}  // namespace

TEST_CASE("ring all-reduce sums and every replica holds identical bits") {
  const uint64_t seed = 20261129;
  INFO("seed=" << seed);
  for (int world : {2, 3, 5}) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{1000}}) {
      CAPTURE(world);
      CAPTURE(n);
      std::mt19937_64 rng(seed);
      std::normal_distribution<float> normal;
      std::vector<double> expect(n, 0.0);
      for (int r = 0; r < world; ++r)
        for (size_t i = 0; i < n; ++i)
          expect[i] += normal(rng);
      auto got = reduce(world, n, seed);
      for (size_t i = 0; i < n; ++i)
        CHECK(got[0][i] == doctest::Approx(expect[i]).epsilon(1e-5));
      for (int r = 1; r < world; ++r)
        CHECK(std::memcmp(got[0].data(), got[static_cast<size_t>(r)].data(), n * sizeof(float))
              == 0);
    }
  }
}

TEST_CASE("ring all-reduce refuses a chunk it does not expect and sums nothing") {
  std::vector<float> a(10, 1.0f), b(10, 2.0f);
  ring_allreduce r0(0, 2), r1(1, 2);
  auto from0 = r0.start(5, a);
  (void)r0;
  r1.start(5, b);
  // r1 expects chunk 0 of step 5 from r0; r0's first chunk of step 5 is right, but a chunk of
  // another step (or length) is an error.
  ring_allreduce other(0, 2);
  std::vector<float> c(10, 3.0f);
  auto wrong_step = other.start(6, c);
  capnp_payload out;
  auto refused = r1.receive(wrong_step, out);
  REQUIRE(!refused);
  CHECK(error_text(refused.error()).find("step is 6, expected 5") != std::string::npos);
  CHECK(b[0] == 2.0f);
  std::vector<float> shorter(8, 3.0f);
  ring_allreduce other2(0, 2);
  auto wrong_length = other2.start(5, shorter);
  refused = r1.receive(wrong_length, out);
  REQUIRE(!refused);
  CHECK(error_text(refused.error()).find("values has 4 values, expected 5") != std::string::npos);
  auto ok = r1.receive(from0, out);
  REQUIRE(ok);
  CHECK(*ok);
  CHECK(b[0] == 3.0f);
}
