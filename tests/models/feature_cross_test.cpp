// models/data/feature_cross: the cross id is deterministic, differs per combination and per cross
// index; crosses add one slot each (single- and multi-hot bags, empty bags, the bag cap); bad
// crosses are refused; crossed_source crosses every split of a source.
#include "models/data/feature_cross.hpp"
#include "models/data/synthetic.hpp"

#include <doctest/doctest.h>

#include <set>

using namespace satrap;

TEST_CASE("feature crosses: the cross id is deterministic and differs per pair and per cross") {
  const uint64_t a[] = {11, 22}, b[] = {11, 23}, c[] = {22, 11};
  CHECK(cross_id(4, 0, a) == cross_id(4, 0, a));
  CHECK(cross_id(4, 0, a) != cross_id(4, 0, b));
  CHECK(cross_id(4, 0, a) != cross_id(4, 0, c));  // the order of the crossed slots counts
  CHECK(cross_id(4, 0, a) != cross_id(4, 1, a));  // the same ids in another cross
  CHECK(cross_id(4, 0, a) != cross_id(5, 0, a));  // another slot number
  CHECK(cross_id(4, 0, a) != a[0]);
  // No collisions among many combinations of many crosses.
  std::set<uint64_t> ids;
  for (int cross = 0; cross < 4; ++cross)
    for (uint64_t x = 0; x < 200; ++x)
      for (uint64_t y = 0; y < 200; ++y) {
        const uint64_t pair[] = {x, y};
        ids.insert(cross_id(3, cross, pair));
      }
  CHECK(ids.size() == 4u * 200 * 200);
}

TEST_CASE("feature crosses: each cross adds a slot after the data's own") {
  // Two samples, 3 slots; sample 1 has a bag of two ids in slot 1 and an empty slot 2.
  std::vector<uint32_t> offsets{0, 1, 2, 3, 4, 6, 6};
  std::vector<uint64_t> ids{10, 20, 30, 40, 50, 51};
  const feature_crosses crosses{{0, 1}, {1, 2}, {0, 1, 2}};
  REQUIRE(check_crosses(crosses, 3).ok());
  add_crosses(crosses, 2, 3, offsets, ids);
  REQUIRE(offsets.size() == 2 * 6 + 1);
  auto bag = [&](int sample, int slot) {
    auto k = static_cast<size_t>(sample) * 6 + slot;
    return std::vector<uint64_t>(ids.begin() + offsets[k], ids.begin() + offsets[k + 1]);
  };
  CHECK(bag(0, 0) == std::vector<uint64_t>{10});  // the data's slots are unchanged
  CHECK(bag(0, 2) == std::vector<uint64_t>{30});
  CHECK(bag(1, 1) == std::vector<uint64_t>{50, 51});
  CHECK(bag(1, 2).empty());
  const uint64_t p00[] = {10, 20}, p01[] = {20, 30}, p02[] = {10, 20, 30};
  CHECK(bag(0, 3) == std::vector<uint64_t>{cross_id(3, 0, p00)});
  CHECK(bag(0, 4) == std::vector<uint64_t>{cross_id(3, 1, p01)});
  CHECK(bag(0, 5) == std::vector<uint64_t>{cross_id(3, 2, p02)});
  const uint64_t q0[] = {40, 50}, q1[] = {40, 51};
  CHECK(bag(1, 3) == std::vector<uint64_t>{cross_id(3, 0, q0), cross_id(3, 0, q1)});  // the product
  CHECK(bag(1, 4).empty());  // an empty crossed bag: an empty cross
  CHECK(bag(1, 5).empty());
}

TEST_CASE("feature crosses: a product larger than the cap keeps its first combinations") {
  std::vector<uint32_t> offsets{0, 40, 80};
  std::vector<uint64_t> ids(80);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = 1000 + i;
  add_crosses({{0, 1}}, 1, 2, offsets, ids);
  REQUIRE(offsets.size() == 4);
  CHECK(offsets[3] - offsets[2] == cross_bag_max);  // 1600 combinations, 1024 kept
  const uint64_t first[] = {1000, 1040}, second[] = {1000, 1041};
  CHECK(ids[offsets[2]] == cross_id(2, 0, first));
  CHECK(ids[offsets[2] + 1] == cross_id(2, 0, second));
}

TEST_CASE("feature crosses: bad crosses are refused with what was expected") {
  auto error = [](const feature_crosses& c) {
    auto r = check_crosses(c, 4);
    return r.ok() ? std::string{} : r.error();
  };
  CHECK(error({}).empty());
  CHECK(error({{0, 1}, {2, 3}, {0, 1, 2}}).empty());
  CHECK(error({{0}}).find("data.crosses[0] [0]: expected 2 or more slots") != std::string::npos);
  CHECK(error({{0, 1}, {}}).find("data.crosses[1] []: expected 2 or more") != std::string::npos);
  CHECK(error({{0, 4}}).find("expected slots in [0, 4)") != std::string::npos);
  CHECK(error({{-1, 2}}).find("got -1") != std::string::npos);
  CHECK(error({{1, 1}}).find("distinct slots") != std::string::npos);
  CHECK(
    error({{0, 1}, {1, 0}}).find("data.crosses[1] [1, 0]: expected each set of slots crossed once")
    != std::string::npos);
  CHECK(check_crosses({{0}}, 4).bad_input());
}

TEST_CASE("feature crosses: crossed_source crosses every split and grows the slot count") {
  synthetic_options o;
  o.slots = 3;
  o.vocab = 50;
  auto inner = std::make_shared<const synthetic_generator>(o);
  crossed_source src(inner, {{0, 1}, {0, 2}});
  CHECK(src.slots() == 5);
  CHECK(src.dense_features() == inner->dense_features());
  CHECK(src.has_teacher());
  for (auto split : {data_split::train, data_split::test, data_split::validation}) {
    auto plain = inner->make_batch(split, 3, 16);
    auto b = src.make_batch(split, 3, 16);
    CHECK(b.slots == 5);
    REQUIRE(b.offsets.size() == 16 * 5 + 1);
    CHECK(b.labels == plain.labels);
    CHECK(b.dense == plain.dense);
    for (int i = 0; i < 16; ++i) {
      const uint64_t* x = &plain.ids[static_cast<size_t>(i) * 3];
      CHECK(b.ids[b.offsets[i * 5 + 1]] == x[1]);
      const uint64_t p01[] = {x[0], x[1]}, p02[] = {x[0], x[2]};
      CHECK(b.ids[b.offsets[i * 5 + 3]] == cross_id(3, 0, p01));
      CHECK(b.ids[b.offsets[i * 5 + 4]] == cross_id(3, 1, p02));
    }
    auto again = src.make_batch(split, 3, 16);
    CHECK(again.ids == b.ids);  // deterministic
  }
}
