// Id de-duplication and bag pooling (sum / mean / sqrtn, per slot, weighted), values and gradients.
#include <doctest/doctest.h>

#include <algorithm>
#include <unordered_map>

#include "grad_check.hpp"
#include "models/embedding/pooling.hpp"

using namespace satrap;
using namespace satrap::testing;

TEST_CASE("dedup_ids keeps first-appearance order and a correct inverse") {
  std::vector<uint64_t> ids = {5, 3, 5, 7, 3, 3, UINT64_MAX, 0};
  dedup_result r = dedup_ids(ids);
  CHECK(r.unique == std::vector<uint64_t>{5, 3, 7, UINT64_MAX, 0});
  CHECK(r.inverse == std::vector<uint32_t>{0, 1, 0, 2, 1, 1, 3, 4});
  CHECK(dedup_ids({}).unique.empty());
}

TEST_CASE("dedup_ids agrees with std::unordered_map on many ids") {
  std::vector<uint64_t> ids(20000);
  uint64_t s = 12345;
  for (auto& id : ids) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    id = (s % 3000) * 0x100000001ULL;  // many repeats, structured bits
  }
  dedup_result r = dedup_ids(ids);
  std::unordered_map<uint64_t, uint32_t> seen;
  for (uint64_t id : ids)
    seen.emplace(id, static_cast<uint32_t>(seen.size()));
  REQUIRE(r.unique.size() == seen.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    REQUIRE(r.unique[r.inverse[k]] == ids[k]);
    REQUIRE(r.inverse[k] == seen[ids[k]]);
  }
}

TEST_CASE("pool_forward sums or averages bags and zeroes empty bags") {
  const int dim = 2;
  std::vector<float> rows = {1, 2, 10, 20, 100, 200};  // 3 unique rows
  std::vector<uint32_t> offsets = {0, 2, 2, 5};        // bags: {0,1}, {}, {2,2,0}
  std::vector<uint32_t> inverse = {0, 1, 2, 2, 0};
  std::vector<float> out(3 * dim, -1.0f);
  pool_forward(pooling::sum, dim, offsets, inverse, rows.data(), out.data());
  CHECK(out == std::vector<float>{11, 22, 0, 0, 201, 402});
  pool_forward(pooling::mean, dim, offsets, inverse, rows.data(), out.data());
  CHECK(out[0] == doctest::Approx(5.5));
  CHECK(out[2] == 0.0f);
  CHECK(out[4] == doctest::Approx(67.0));
  CHECK(out[5] == doctest::Approx(134.0));
}

TEST_CASE("pool_backward matches finite differences for sum and mean") {
  const int dim = 3;
  std::vector<uint32_t> offsets = {0, 3, 3, 4, 7};
  std::vector<uint32_t> inverse = {0, 1, 0, 2, 3, 1, 1};
  for (pooling mode : {pooling::sum, pooling::mean}) {
    auto rows = random_vector(4 * dim, 51);
    auto r = random_vector(4 * dim, 52);
    std::vector<float> out(4 * dim), grad(4 * dim, 0.0f);
    pool_backward(mode, dim, offsets, inverse, r.data(), grad.data());
    auto loss = [&] {
      pool_forward(mode, dim, offsets, inverse, rows.data(), out.data());
      return weighted_sum(out, r);
    };
    check_gradient(loss, rows, grad, 1e-2f, 1e-4, 1e-3);
    // It accumulates into grad_unique.
    std::vector<float> twice = grad;
    pool_backward(mode, dim, offsets, inverse, r.data(), twice.data());
    for (size_t i = 0; i < grad.size(); ++i)
      CHECK(twice[i] == doctest::Approx(2.0 * grad[i]));
  }
}

TEST_CASE("pool_forward_rows (a pointer per unique row) equals pool_forward at every dim") {
  // Dims 8/16/32/64 take the compile-time loops, 3 and 12 the run-time one; bags of 0-4 ids.
  const uint64_t seed = 20261203;
  uint64_t s = seed;
  auto next = [&s] {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return s;
  };
  for (int dim : {3, 8, 12, 16, 32, 64}) {
    const uint32_t unique = 37;
    std::vector<uint32_t> offsets = {0}, inverse;
    for (int b = 0; b < 50; ++b) {
      auto n = next() % 5;
      for (uint64_t k = 0; k < n; ++k)
        inverse.push_back(static_cast<uint32_t>(next() % unique));
      offsets.push_back(static_cast<uint32_t>(inverse.size()));
    }
    auto rows = random_vector(unique * static_cast<size_t>(dim), 61 + static_cast<uint64_t>(dim));
    // The rows scattered in reverse order in another buffer, reached through pointers.
    std::vector<float> scattered(rows.size());
    std::vector<const float*> ptrs(unique);
    for (uint32_t u = 0; u < unique; ++u) {
      float* dst = scattered.data() + (unique - 1 - u) * static_cast<size_t>(dim);
      std::copy_n(rows.data() + u * static_cast<size_t>(dim), dim, dst);
      ptrs[u] = dst;
    }
    for (pooling mode : {pooling::sum, pooling::mean}) {
      const size_t n = (offsets.size() - 1) * static_cast<size_t>(dim);
      std::vector<float> a(n, -7.0f), b(n, 7.0f);
      pool_forward(mode, dim, offsets, inverse, rows.data(), a.data());
      pool_forward_rows(mode, dim, offsets, inverse, ptrs, b.data());
      INFO("seed=" << seed << " dim=" << dim << " mean=" << (mode == pooling::mean));
      REQUIRE(a == b);
      // And both are the sums a plain double loop gives, to float rounding.
      for (size_t bag = 0; bag + 1 < offsets.size(); ++bag)
        for (int d = 0; d < dim; ++d) {
          double sum = 0.0;
          for (uint32_t k = offsets[bag]; k < offsets[bag + 1]; ++k)
            sum += rows[inverse[k] * static_cast<size_t>(dim) + static_cast<size_t>(d)];
          auto count = offsets[bag + 1] - offsets[bag];
          if (mode == pooling::mean && count > 0)
            sum /= count;
          CHECK(a[bag * static_cast<size_t>(dim) + static_cast<size_t>(d)]
                == doctest::Approx(sum).epsilon(1e-5));
        }
    }
  }
}

TEST_CASE("per-slot weighted pooling: sum, mean and sqrtn values by hand") {
  const int dim = 2;
  std::vector<float> rows = {1, 2, 10, 20};
  std::vector<const float*> ptrs = {rows.data(), rows.data() + 2};
  // One sample, three slots (sum, mean, sqrtn), each the bag {0, 1} with weights 3 and 4.
  std::vector<pooling> slots = {pooling::sum, pooling::mean, pooling::sqrtn};
  std::vector<uint32_t> offsets = {0, 2, 4, 6}, inverse = {0, 1, 0, 1, 0, 1};
  std::vector<float> w = {3, 4, 3, 4, 3, 4};
  std::vector<float> out(3 * dim, -1.0f);
  pool_forward_rows_slots(slots, w, dim, offsets, inverse, ptrs, out.data());
  CHECK(out[0] == 43.0f);  // 3*1 + 4*10
  CHECK(out[1] == 86.0f);
  CHECK(out[2] == doctest::Approx(43.0 / 7.0));  // / (3 + 4)
  CHECK(out[4] == doctest::Approx(43.0 / 5.0));  // / sqrt(9 + 16)
  // Unweighted: mean / n, sqrtn / sqrt(n).
  pool_forward_rows_slots(slots, {}, dim, offsets, inverse, ptrs, out.data());
  CHECK(out[0] == 11.0f);
  CHECK(out[2] == doctest::Approx(5.5));
  CHECK(out[4] == doctest::Approx(11.0 / std::sqrt(2.0)));
  // Weights that sum to 0 under mean pool to zeros, not infinities.
  std::vector<float> zero = {1, -1, 1, -1, 1, -1};
  pool_forward_rows_slots(slots, zero, dim, offsets, inverse, ptrs, out.data());
  CHECK(out[2] == 0.0f);
  CHECK(out[3] == 0.0f);
  // The same unweighted sqrtn through pool_forward (one mode).
  std::vector<float> rows_flat = {1, 2, 10, 20}, one(dim);
  std::vector<uint32_t> one_bag = {0, 2};
  pool_forward(pooling::sqrtn, dim, one_bag, std::vector<uint32_t>{0, 1}, rows_flat.data(),
               one.data());
  CHECK(one[0] == doctest::Approx(11.0 / std::sqrt(2.0)));
}

TEST_CASE(
  "per-slot weighted pooling: gradients match finite differences, and unweighted sum/mean "
  "equal pool_forward_rows bit for bit") {
  const int dim = 3;
  // Two samples, two slots: slot 0 mean, slot 1 sqrtn (then sum, sqrtn; then sum, mean).
  std::vector<uint32_t> offsets = {0, 3, 3, 4, 7};
  std::vector<uint32_t> inverse = {0, 1, 0, 2, 3, 1, 1};
  auto w = random_vector(7, 71);
  for (auto& x : w)
    x += 1.5f;  // positive weights, away from a zero divisor
  for (auto slots : {std::vector<pooling>{pooling::mean, pooling::sqrtn},
                     std::vector<pooling>{pooling::sum, pooling::sqrtn},
                     std::vector<pooling>{pooling::sum, pooling::mean}}) {
    for (bool weighted : {false, true}) {
      std::span<const float> ws = weighted ? std::span<const float>(w) : std::span<const float>();
      auto rows = random_vector(4 * dim, 51);
      auto r = random_vector(4 * dim, 52);
      std::vector<float> out(4 * dim), grad(4 * dim, 0.0f);
      std::vector<const float*> ptrs(4);
      pool_backward_slots(slots, ws, dim, offsets, inverse, r.data(), grad.data());
      auto loss = [&] {
        for (size_t u = 0; u < 4; ++u)
          ptrs[u] = rows.data() + u * dim;
        pool_forward_rows_slots(slots, ws, dim, offsets, inverse, ptrs, out.data());
        return weighted_sum(out, r);
      };
      check_gradient(loss, rows, grad, 1e-2f, 1e-4, 1e-3);
    }
  }
  // One mode for every slot, no weights: the same bits as the single-mode path.
  for (pooling mode : {pooling::sum, pooling::mean}) {
    auto rows = random_vector(4 * dim, 53);
    std::vector<const float*> ptrs = {rows.data(), rows.data() + dim, rows.data() + 2 * dim,
                                      rows.data() + 3 * dim};
    std::vector<float> a(4 * dim), b(4 * dim);
    std::vector<pooling> one = {mode};
    pool_forward_rows(mode, dim, offsets, inverse, ptrs, a.data());
    pool_forward_rows_slots(one, {}, dim, offsets, inverse, ptrs, b.data());
    CHECK(a == b);
  }
}
