// Unpooled sequences (models/data/sequence_source.hpp): a sequence's bag becomes one-id positions
// after the pooled slots, cut to its most recent ids, with its length as a dense column; and the
// synthetic history (a target-attention teacher) that feeds it.
#include <doctest/doctest.h>

#include "models/data/sequence_source.hpp"
#include "models/data/synthetic.hpp"

#include <algorithm>

using namespace satrap;

TEST_CASE(
  "expand_sequences: positions after the pooled slots, most recent ids kept, lengths as dense") {
  // 2 samples, 3 slots: slot 1 is a sequence of 3 positions.
  batch in;
  in.size = 2;
  in.slots = 3;
  in.dense_features = 1;
  in.tasks = 1;
  //         s0   s1 (sequence)   s2
  // sample0 [10] [20 21 22 23]   [30 31]
  // sample1 []   [24]            [32]
  in.ids = {10, 20, 21, 22, 23, 30, 31, 24, 32};
  in.offsets = {0, 1, 5, 7, 7, 8, 9};
  in.weights = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  in.dense = {0.5f, -0.5f};
  in.labels = {1, 0};
  unpooled_sequences seq{{1}, {3}, {"history"}};
  auto out = expand_sequences(in, seq);
  CHECK(out.slots == 2 + 3);
  CHECK(out.dense_features == 2);
  CHECK(out.ids == std::vector<uint64_t>{10, 30, 31, 21, 22, 23, 32, 24});
  CHECK(out.weights == std::vector<float>{1, 6, 7, 3, 4, 5, 9, 8});
  // sample0: [10] [30 31] | 21 | 22 | 23    sample1: [] [32] | 24 | - | -
  CHECK(out.offsets == std::vector<uint32_t>{0, 1, 3, 4, 5, 6, 6, 7, 8, 8, 8});
  CHECK(out.dense == std::vector<float>{0.5f, 3.0f, -0.5f, 1.0f});
  CHECK(out.labels == in.labels);
  CHECK(expand_sequences(in, {}).ids == in.ids);  // no sequences: the batch as it is
}

TEST_CASE("synthetic history: an item sequence in the item table, with a teacher that uses it") {
  synthetic_options o;
  o.slots = 3;
  o.vocab = 500;
  o.dense_features = 2;
  o.history = 6;
  synthetic_generator g(o);
  CHECK(g.slots() == 4);
  batch b = g.make_batch(data_split::train, 1, 64);
  REQUIRE(b.slots == 4);
  REQUIRE(b.offsets.size() == 64 * 4 + 1);
  std::vector<uint64_t> items;
  synthetic_options plain = o;
  plain.history = 0;
  batch p = synthetic_generator(plain).make_batch(data_split::train, 1, 64);
  for (int i = 0; i < 64; ++i) {
    const uint32_t* bag = b.offsets.data() + i * 4;
    const uint32_t n = bag[4] - bag[3];
    CHECK(n >= 1);
    CHECK(n <= 6);
    // The other slots' ids are the plain generator's.
    for (int s = 0; s < 3; ++s)
      CHECK(b.ids[bag[s]] == p.ids[static_cast<size_t>(i) * 3 + s]);
    for (auto k = bag[3]; k < bag[4]; ++k)
      items.push_back(b.ids[k]);
  }
  // History items live in slot 1's id space: many are ids the candidate slot also draws.
  std::vector<uint64_t> candidates;
  batch big = synthetic_generator(plain).make_batch(data_split::train, 0, 4096);
  for (int i = 0; i < 4096; ++i)
    candidates.push_back(big.ids[static_cast<size_t>(i) * 3 + 1]);
  std::sort(candidates.begin(), candidates.end());
  int shared = 0;
  for (auto id : items)
    shared += std::binary_search(candidates.begin(), candidates.end(), id) ? 1 : 0;
  CHECK(shared > static_cast<int>(items.size()) / 2);
  // The history changes the teacher: the probabilities differ from the plain data's.
  int differ = 0;
  for (int i = 0; i < 64; ++i)
    differ += b.probs[i] != p.probs[i] ? 1 : 0;
  CHECK(differ > 32);
  // Deterministic.
  CHECK(g.make_batch(data_split::train, 1, 64).ids == b.ids);
}
