// The synthetic generator: determinism, layout, Zipf skew, label rate, teacher quality.
#include <doctest/doctest.h>

#include <algorithm>
#include <unordered_map>

#include "models/data/synthetic.hpp"
#include "models/metrics.hpp"

using namespace satrap;

namespace {

synthetic_options small_options() {
  synthetic_options o;
  o.slots = 4;
  o.vocab = 1000;
  o.ids_per_sample = 2;
  o.dense_features = 3;
  o.seed = 5;
  return o;
}

bool same(const batch& a, const batch& b) {
  return a.offsets == b.offsets && a.ids == b.ids && a.dense == b.dense && a.labels == b.labels
         && a.probs == b.probs;
}

}  // namespace

TEST_CASE("synthetic batches have the documented layout") {
  synthetic_generator g(small_options());
  batch b = g.make_batch(data_split::train, 3, 16);
  CHECK(b.index == 3);
  CHECK(b.size == 16);
  CHECK(b.slots == 4);
  CHECK(b.offsets.size() == 16 * 4 + 1);
  CHECK(b.offsets.back() == b.ids.size());
  CHECK(b.ids.size() == 16 * 4 * 2);
  CHECK(b.dense.size() == 16 * 3);
  CHECK(b.labels.size() == 16);
  CHECK(b.probs.size() == 16);
  for (float l : b.labels)
    CHECK((l == 0.0f || l == 1.0f));
}

TEST_CASE("synthetic bag sizes per slot lay out bags of those sizes") {
  synthetic_options o = small_options();
  o.bag_sizes = {3, 1, 2, 5};
  synthetic_generator g(o);
  batch b = g.make_batch(data_split::train, 2, 8);
  REQUIRE(b.offsets.size() == 8 * 4 + 1);
  CHECK(b.ids.size() == 8 * 11);
  for (int i = 0; i < 8; ++i)
    for (int s = 0; s < 4; ++s)
      CHECK(b.offsets[i * 4 + s + 1] - b.offsets[i * 4 + s]
            == static_cast<uint32_t>(o.bag_sizes[static_cast<size_t>(s)]));
  // Every slot's bags hold ids of that slot's space only (slot_id_hash of the slot).
  std::unordered_map<uint64_t, int> slot_of;
  for (int i = 0; i < 8; ++i)
    for (int s = 0; s < 4; ++s)
      for (auto k = b.offsets[i * 4 + s]; k < b.offsets[i * 4 + s + 1]; ++k) {
        auto [it, fresh] = slot_of.emplace(b.ids[k], s);
        CHECK(it->second == s);
      }
  // Bag sizes equal to ids_per_sample in every slot are the same data, bit for bit.
  synthetic_options flat = small_options();
  flat.bag_sizes = {2, 2, 2, 2};
  CHECK(same(synthetic_generator(small_options()).make_batch(data_split::test, 4, 16),
             synthetic_generator(flat).make_batch(data_split::test, 4, 16)));
}

TEST_CASE("synthetic batches are deterministic and differ by index, split and seed") {
  synthetic_generator g(small_options());
  CHECK(same(g.make_batch(data_split::train, 7, 32), g.make_batch(data_split::train, 7, 32)));
  CHECK(!same(g.make_batch(data_split::train, 7, 32), g.make_batch(data_split::train, 8, 32)));
  CHECK(!same(g.make_batch(data_split::train, 7, 32), g.make_batch(data_split::test, 7, 32)));
  synthetic_options other = small_options();
  other.seed = 6;
  CHECK(!same(g.make_batch(data_split::train, 7, 32),
              synthetic_generator(other).make_batch(data_split::train, 7, 32)));
  // Sample i of batch k is sample k*batch_size+i of the split.
  batch big = g.make_batch(data_split::train, 1, 4), one = g.make_batch(data_split::train, 5, 1);
  CHECK(std::equal(one.ids.begin(), one.ids.end(), big.ids.begin() + 1 * 4 * 2));
  CHECK(one.labels[0] == big.labels[1]);
}

TEST_CASE("synthetic ids are Zipf-skewed, slot-specific and not small numbers") {
  synthetic_options o = small_options();
  o.vocab = 100000;
  o.zipf_exponent = 1.05;
  o.ids_per_sample = 1;
  synthetic_generator g(o);
  batch b = g.make_batch(data_split::train, 0, 20000);
  std::unordered_map<uint64_t, int> slot0;
  std::unordered_map<uint64_t, int> all;
  for (int i = 0; i < b.size; ++i) {
    for (int s = 0; s < b.slots; ++s)
      ++all[b.ids[i * b.slots + s]];
    ++slot0[b.ids[i * b.slots]];
  }
  std::vector<int> counts;
  for (auto& [id, c] : slot0)
    counts.push_back(c);
  std::sort(counts.rbegin(), counts.rend());
  // P(rank 1) = 1/H where H = sum_{r<=1e5} r^-1.05 ~ 9.9: about 2000 of 20000.
  CHECK(counts[0] > 1400);
  CHECK(counts[0] < 2800);
  CHECK(counts[0] > 1.5 * counts[1]);
  CHECK(slot0.size() > 3000);  // a long tail
  // No id is shared across slots (each slot has its own id space).
  size_t per_slot_total = 0;
  for (int s = 0; s < b.slots; ++s) {
    std::unordered_map<uint64_t, int> m;
    for (int i = 0; i < b.size; ++i)
      ++m[b.ids[i * b.slots + s]];
    per_slot_total += m.size();
  }
  CHECK(per_slot_total == all.size());
  for (auto& [id, c] : slot0)
    CHECK(id > 1000000);
}

TEST_CASE(
  "synthetic labels follow the teacher: sane rate, probs calibrated, oracle AUC meaningful") {
  synthetic_generator g(synthetic_options{});
  batch b = g.make_batch(data_split::test, 0, 20000);
  double rate = 0.0, mean_prob = 0.0;
  for (int i = 0; i < b.size; ++i) {
    rate += b.labels[i] / b.size;
    mean_prob += b.probs[i] / b.size;
  }
  CHECK(rate > 0.1);
  CHECK(rate < 0.6);
  CHECK(mean_prob == doctest::Approx(rate).epsilon(0.05));
  double oracle = auc_exact(b.probs, b.labels);
  CHECK(oracle > 0.75);
  CHECK(oracle < 0.9);
}

TEST_CASE("two-label teacher: a purchase needs a click, the first task is the one-label data") {
  auto o = small_options();
  synthetic_generator one(o);
  o.tasks = 2;
  synthetic_generator two(o);
  CHECK(two.tasks() == 2);
  const int n = 4096;
  batch a = one.make_batch(data_split::train, 2, n), b = two.make_batch(data_split::train, 2, n);
  CHECK(b.tasks == 2);
  REQUIRE(b.labels.size() == 2 * static_cast<size_t>(n));
  REQUIRE(b.probs.size() == 2 * static_cast<size_t>(n));
  CHECK(a.ids == b.ids);
  CHECK(a.dense == b.dense);
  int clicks = 0, buys = 0;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    CHECK(b.labels[2 * i] == a.labels[i]);  // the same click draws
    CHECK(b.probs[2 * i] == a.probs[i]);
    CHECK(b.labels[2 * i + 1] <= b.labels[2 * i]);        // no purchase without a click
    CHECK(b.probs[2 * i + 1] <= b.probs[2 * i] + 1e-7f);  // P(click and buy) <= P(click)
    clicks += b.labels[2 * i] > 0;
    buys += b.labels[2 * i + 1] > 0;
  }
  CHECK(buys > 0);
  CHECK(buys < clicks);
  // The oracle of each task beats chance clearly.
  auto p1 = task_column(b.probs, 2, 1), y1 = task_column(b.labels, 2, 1);
  CHECK(auc_exact(p1, y1) > 0.75);
}
