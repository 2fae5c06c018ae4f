// Id de-duplication and bag pooling (sum / mean), forward values and gradients.
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
