// The production embedding store: optimizers against their formulas, eviction order, admission,
// fp16 round trip, scalar vs AVX2 kernels, counters.
#include "models/embedding/embedding_table.hpp"
#include "models/embedding/fp16.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace satrap;

namespace {

constexpr uint64_t test_seed = 20240611;

embedding_options small_options(sparse_optimizer_kind kind, int dim = 11) {
  embedding_options o;
  o.dim = dim;  // 11: one AVX2 block and a scalar tail
  o.optimizer = kind;
  o.learning_rate = 0.1f;
  o.initial_accumulator = 0.25f;
  o.eps = 1e-3f;
  o.init_scale = 0.5f;
  o.seed = test_seed;
  return o;
}

std::vector<float> grads_for(uint64_t seed, int steps, int dim) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> g(static_cast<size_t>(steps) * dim);
  for (auto& x : g)
    x = n(rng);
  return g;
}

// The formulas in double, one coordinate vector per row.
struct reference_row {
  std::vector<double> w, a, b;
  double acc = 0;
  int t = 0;
};

void reference_step(const embedding_options& o, reference_row& r, const float* g32) {
  const int dim = o.dim;
  std::vector<double> g(dim);
  for (int d = 0; d < dim; ++d)
    g[d] = g32[d] + double(o.weight_decay) * r.w[d];
  switch (o.optimizer) {
    case sparse_optimizer_kind::sgd:
      for (int d = 0; d < dim; ++d)
        r.w[d] -= o.learning_rate * g[d];
      break;
    case sparse_optimizer_kind::adagrad:
      for (int d = 0; d < dim; ++d) {
        r.a[d] += g[d] * g[d];
        r.w[d] -= o.learning_rate * g[d] / (std::sqrt(r.a[d]) + o.eps);
      }
      break;
    case sparse_optimizer_kind::rowwise_adagrad: {
      double s = 0;
      for (int d = 0; d < dim; ++d)
        s += g[d] * g[d];
      r.acc += s / dim;
      for (int d = 0; d < dim; ++d)
        r.w[d] -= o.learning_rate * g[d] / (std::sqrt(r.acc) + o.eps);
      break;
    }
    case sparse_optimizer_kind::adam: {
      ++r.t;
      double b1 = o.beta1, b2 = o.beta2;
      for (int d = 0; d < dim; ++d) {
        r.a[d] = b1 * r.a[d] + (1 - b1) * g[d];
        r.b[d] = b2 * r.b[d] + (1 - b2) * g[d] * g[d];
        double mh = r.a[d] / (1 - std::pow(b1, r.t)), vh = r.b[d] / (1 - std::pow(b2, r.t));
        r.w[d] -= o.learning_rate * mh / (std::sqrt(vh) + o.eps);
      }
      break;
    }
    case sparse_optimizer_kind::ftrl:  // a = z, b = n
      for (int d = 0; d < dim; ++d) {
        double n_new = r.b[d] + g[d] * g[d];
        double sigma = (std::sqrt(n_new) - std::sqrt(r.b[d])) / o.learning_rate;
        r.a[d] += g[d] - sigma * r.w[d];
        r.b[d] = n_new;
        double z = r.a[d];
        r.w[d] = std::abs(z) <= o.ftrl_l1
                   ? 0.0
                   : -(z - std::copysign(double(o.ftrl_l1), z))
                       / ((o.ftrl_beta + std::sqrt(n_new)) / o.learning_rate + o.ftrl_l2);
      }
      break;
  }
  if (o.clip > 0)
    for (auto& w : r.w)
      w = std::min<double>(std::max<double>(w, -o.clip), o.clip);
}

// Runs `steps` updates of one id in the store and in double; compares after every step.
void check_formula(embedding_options o, int steps) {
  CAPTURE(test_seed);
  CAPTURE(static_cast<int>(o.optimizer));
  CAPTURE(o.weight_decay);
  CAPTURE(o.clip);
  embedding_table table(o);
  const uint64_t id = 4242;
  std::vector<float> w(o.dim);
  table.lookup({&id, 1}, w.data());
  reference_row r;
  r.w.assign(w.begin(), w.end());
  double a0 = o.optimizer == sparse_optimizer_kind::adagrad ? o.initial_accumulator : 0.0;
  r.a.assign(o.dim, a0);
  r.b.assign(o.dim, o.optimizer == sparse_optimizer_kind::ftrl ? o.initial_accumulator : 0.0);
  r.acc = o.initial_accumulator;
  auto g = grads_for(test_seed + static_cast<int>(o.optimizer), steps, o.dim);
  for (int s = 0; s < steps; ++s) {
    CAPTURE(s);
    table.update({&id, 1}, g.data() + static_cast<size_t>(s) * o.dim);
    reference_step(o, r, g.data() + static_cast<size_t>(s) * o.dim);
    table.lookup({&id, 1}, w.data());
    for (int d = 0; d < o.dim; ++d)
      CHECK(w[d] == doctest::Approx(r.w[d]).epsilon(2e-5).scale(0.1));
  }
}

const sparse_optimizer_kind all_kinds[] = {
  sparse_optimizer_kind::sgd, sparse_optimizer_kind::adagrad,
  sparse_optimizer_kind::rowwise_adagrad, sparse_optimizer_kind::adam, sparse_optimizer_kind::ftrl};

}  // namespace

TEST_CASE("store: every sparse optimizer follows its formula over several steps") {
  for (auto kind : all_kinds)
    for (auto simd : {simd_choice::scalar, simd_choice::automatic}) {
      auto o = small_options(kind);
      o.simd = simd;
      check_formula(o, 5);
    }
}

TEST_CASE("store: weight decay, clip and FTRL regularisation follow their formulas") {
  for (auto kind : all_kinds) {
    auto o = small_options(kind);
    o.weight_decay = 0.05f;
    o.clip = 0.3f;
    o.ftrl_l1 = 0.01f;
    o.ftrl_l2 = 0.1f;
    check_formula(o, 5);
  }
}

TEST_CASE("store: scalar and AVX2 kernels give the same bits") {
  if (!sparse_kernels_avx2())
    return;  // nothing to compare on this CPU
  for (auto kind : all_kinds)
    for (auto prec : {weight_precision::fp32, weight_precision::fp16}) {
      CAPTURE(test_seed);
      CAPTURE(static_cast<int>(kind));
      auto o = small_options(kind, 19);
      o.precision = prec;
      o.weight_decay = 0.01f;
      auto o_scalar = o;
      o_scalar.simd = simd_choice::scalar;
      embedding_table a(o), b(o_scalar);
      CHECK(std::string(a.kernels_name()) == "avx2");
      std::vector<uint64_t> ids = {1, 2, 3};
      auto g = grads_for(test_seed, 4 * 3, o.dim);
      for (int s = 0; s < 4; ++s) {
        a.update(ids, g.data() + s * 3 * o.dim);
        b.update(ids, g.data() + s * 3 * o.dim);
      }
      std::vector<float> wa(3 * o.dim), wb(3 * o.dim);
      a.lookup(ids, wa.data());
      b.lookup(ids, wb.data());
      CHECK(std::memcmp(wa.data(), wb.data(), wa.size() * 4) == 0);
    }
}

TEST_CASE("store: init kinds are deterministic per id - zeros are zero - normal has the scale") {
  auto o = small_options(sparse_optimizer_kind::sgd, 64);
  o.init = embedding_init_kind::normal;
  o.init_scale = 2.0f;
  std::vector<float> a(64), b(64);
  embedding_init_row(o, 9, a.data());
  embedding_init_row(o, 9, b.data());
  CHECK(a == b);
  double ss = 0;
  for (int id = 0; id < 200; ++id) {
    embedding_init_row(o, id, a.data());
    for (float x : a)
      ss += double(x) * x;
  }
  CHECK(std::sqrt(ss / (200 * 64)) == doctest::Approx(2.0).epsilon(0.05));
  o.init = embedding_init_kind::zeros;
  embedding_init_row(o, 9, a.data());
  CHECK(a == std::vector<float>(64, 0.0f));
}

TEST_CASE("store: fp16 conversions round to nearest even and round-trip every half") {
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
      continue;  // NaN payloads
    CHECK_MESSAGE(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))) == h, "half " << h);
  }
  CHECK(f32_to_f16(1.0f + 0x1.0p-11f) == 0x3c00);      // tie: to even (down)
  CHECK(f32_to_f16(1.0f + 3 * 0x1.0p-11f) == 0x3c02);  // tie: to even (up)
  CHECK(f32_to_f16(65520.0f) == 0x7c00);               // overflows to inf
  CHECK(f32_to_f16(0x1.0p-25f) == 0x0000);             // tie below the least subnormal
  CHECK(f32_to_f16(-0x1.8p-24f) == 0x8002);
  if (const auto* k = sparse_kernels_avx2()) {  // F16C agrees with the scalar code
    std::mt19937 rng(test_seed);
    std::vector<float> x(4096);
    for (auto& v : x)
      v = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), int(rng() % 40) - 28);
    std::vector<uint16_t> h1(x.size()), h2(x.size());
    k->to_f16(x.data(), h1.data(), int(x.size()));
    sparse_kernels_scalar().to_f16(x.data(), h2.data(), int(x.size()));
    CHECK(h1 == h2);
  }
}

TEST_CASE("store: fp16 rows read back within half precision and keep fp32 optimizer state") {
  auto o = small_options(sparse_optimizer_kind::adagrad, 16);
  o.precision = weight_precision::fp16;
  embedding_table t(o);
  CHECK(t.layout().stride == 16 * 2 + 16 * 4);
  std::vector<uint64_t> ids = {10, 11};
  std::vector<float> out(32), init(16);
  t.lookup(ids, out.data());
  embedding_init_row(o, 11, init.data());
  for (int d = 0; d < 16; ++d) {
    CHECK(out[16 + d] == f16_to_f32(f32_to_f16(init[d])));
    CHECK(std::abs(out[16 + d] - init[d]) <= std::abs(init[d]) * 0x1.0p-11f + 1e-7f);
  }
  auto o32 = o;
  o32.precision = weight_precision::fp32;
  embedding_table t32(o32);
  auto g = grads_for(test_seed, 6, 16);
  for (int s = 0; s < 3; ++s) {
    t.update(ids, g.data() + s * 32);
    t32.update(ids, g.data() + s * 32);
  }
  std::vector<float> a(32), b(32);
  t.lookup(ids, a.data());
  t32.lookup(ids, b.data());
  for (int i = 0; i < 32; ++i)
    CHECK(a[i] == doctest::Approx(b[i]).epsilon(3e-3).scale(1e-3));
}

TEST_CASE("store: CLOCK evicts the row not referenced since the hand last passed") {
  auto o = small_options(sparse_optimizer_kind::sgd, 4);
  o.capacity = 4;
  embedding_table t(o);
  std::vector<float> out(4 * 4);
  std::vector<uint64_t> first = {1, 2, 3, 4};
  for (uint64_t id : first)
    t.lookup({&id, 1}, out.data());
  uint64_t id5 = 5;
  t.lookup({&id5, 1}, out.data());  // full: the sweep clears every bit, then evicts one
  auto c = t.counters();
  CHECK(c.rows == 4);
  CHECK(c.evictions == 1);
  // Which one goes depends on the hand's start; what follows fixes who must go next.
  embedding_table u(o);
  for (uint64_t id : first)
    u.lookup({&id, 1}, out.data());
  std::vector<float> g(4, 1.0f);
  for (uint64_t id : first)
    u.update({&id, 1}, g.data());   // all referenced again
  u.lookup({&id5, 1}, out.data());  // evicts one: the first in hand order
  auto survivors = [&](embedding_table& tab) {
    std::vector<uint64_t> s;
    tab.for_each_row(false, [&](uint64_t id, const std::byte*) { s.push_back(id); });
    std::sort(s.begin(), s.end());
    return s;
  };
  auto after5 = survivors(u);
  REQUIRE(after5.size() == 4);
  REQUIRE(std::find(after5.begin(), after5.end(), 5) != after5.end());
  // Every old survivor had its bit cleared by that sweep; touch all but one of them.
  uint64_t untouched = 0;
  for (uint64_t id : after5)
    if (id != 5 && untouched == 0)
      untouched = id;
  for (uint64_t id : after5)
    if (id != untouched && id != 5)
      u.lookup({&id, 1}, out.data());
  uint64_t id6 = 6;
  u.lookup({&id6, 1}, out.data());
  auto after6 = survivors(u);
  CHECK(std::find(after6.begin(), after6.end(), untouched) == after6.end());
  CHECK(std::find(after6.begin(), after6.end(), 6) != after6.end());
  CHECK(u.counters().evictions == 2);
}

TEST_CASE("store: under CLOCK a hot set survives a stream of cold ids") {
  auto o = small_options(sparse_optimizer_kind::sgd, 4);
  o.capacity = 256;
  embedding_table t(o);
  std::vector<uint64_t> hot(64);
  for (size_t i = 0; i < hot.size(); ++i)
    hot[i] = 1000 + i;
  std::vector<float> out(64 * 4);
  uint64_t cold = 1u << 20, warm_evictions = 0;
  for (int round = 0; round < 200; ++round) {
    if (round == 50)
      warm_evictions = t.counters().evictions;  // the warm-up may take hot rows once
    t.lookup(hot, out.data());
    std::vector<uint64_t> fresh(16);
    for (auto& id : fresh)
      id = cold++;
    t.lookup(fresh, out.data());
  }
  size_t hot_alive = 0;
  t.for_each_row(false,
                 [&](uint64_t id, const std::byte*) { hot_alive += id >= 1000 && id < 1064; });
  CHECK(hot_alive == 64);
  CHECK(t.size() == 256);
  CHECK(t.counters().evictions - warm_evictions == 150 * 16);  // after warm-up: only cold rows
}

TEST_CASE("store: a batch larger than the capacity still answers every id with its own row") {
  for (uint64_t capacity : {1, 2, 3, 8, 64}) {
    CAPTURE(capacity);
    auto o = small_options(sparse_optimizer_kind::sgd, 3);
    o.capacity = capacity;
    embedding_table t(o);
    std::vector<uint64_t> ids(100);
    for (size_t i = 0; i < ids.size(); ++i)
      ids[i] = 77 + i * 13;
    std::vector<float> out(300), want(3);
    t.lookup(ids, out.data());
    for (size_t i = 0; i < ids.size(); ++i) {
      embedding_init_row(o, ids[i], want.data());
      CHECK(std::equal(want.begin(), want.end(), out.begin() + i * 3));
    }
    CHECK(t.size() == capacity);
    std::vector<float> g(300, 0.5f);
    t.update(ids, g.data());  // every gradient applied: absent ids re-admitted, others evicted
    CHECK(t.counters().updates == 100);
    CHECK(t.counters().not_admitted_gradients == 0);
  }
}

TEST_CASE("store: eviction none refuses new ids when full and counts their gradients") {
  auto o = small_options(sparse_optimizer_kind::sgd, 2);
  o.capacity = 2;
  o.eviction = eviction_kind::none;
  embedding_table t(o);
  std::vector<uint64_t> ids = {1, 2, 3};
  std::vector<float> out(6), init3(2), g(6, 1.0f);
  t.lookup(ids, out.data());
  embedding_init_row(o, 3, init3.data());
  CHECK(t.size() == 2);
  CHECK(out[4] == init3[0]);
  t.update(ids, g.data());
  auto c = t.counters();
  CHECK(c.updates == 2);
  CHECK(c.not_admitted_gradients == 1);
  CHECK(c.not_admitted_lookups == 1);
}

TEST_CASE("store: count-min admission gives a row from the n-th sighting on") {
  auto o = small_options(sparse_optimizer_kind::sgd, 2);
  o.admission = admission_kind::count_min;
  o.admit_after = 3;
  o.sketch_width = 4096;
  embedding_table t(o);
  uint64_t id = 99;
  std::vector<float> out(2), g = {1.0f, 1.0f}, init(2);
  embedding_init_row(o, id, init.data());
  for (int seen = 1; seen <= 2; ++seen) {
    t.lookup({&id, 1}, out.data());
    CHECK(t.size() == 0);
    CHECK(out == init);  // reads as its initial value
    t.update({&id, 1}, g.data());
  }
  CHECK(t.counters().not_admitted_gradients == 2);  // counted, not silently lost
  t.lookup({&id, 1}, out.data());                   // third sighting
  CHECK(t.size() == 1);
  t.update({&id, 1}, g.data());
  t.lookup({&id, 1}, out.data());
  CHECK(out[0] == doctest::Approx(init[0] - 0.1f));
  auto c = t.counters();
  CHECK(c.admissions == 1);
  CHECK(c.updates == 1);
  CHECK(c.not_admitted_lookups == 2);
}

TEST_CASE("store: probability admission admits about p of first sightings, deterministically") {
  auto o = small_options(sparse_optimizer_kind::sgd, 2);
  o.admission = admission_kind::probability;
  o.admit_probability = 0.25f;
  embedding_table a(o), b(o);
  std::vector<uint64_t> ids(20000);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = i * 7919 + 1;
  std::vector<float> out(ids.size() * 2);
  a.lookup(ids, out.data());
  b.lookup(ids, out.data());
  CAPTURE(test_seed);
  CHECK(a.size() == b.size());
  CHECK(double(a.size()) / ids.size() == doctest::Approx(0.25).epsilon(0.05));
  CHECK(a.counters().admissions + a.counters().not_admitted_lookups == ids.size());
}

TEST_CASE("store: counters count rows, bytes, lookups and updates") {
  auto o = small_options(sparse_optimizer_kind::rowwise_adagrad, 16);
  embedding_table t(o);
  std::vector<uint64_t> ids(1000);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = i;
  std::vector<float> out(ids.size() * 16), g(ids.size() * 16, 0.1f);
  t.lookup(ids, out.data());
  t.update(ids, g.data());
  t.peek(ids, out.data());
  auto c = t.counters();
  CHECK(c.rows == 1000);
  CHECK(c.lookups == 2000);
  CHECK(c.updates == 1000);
  CHECK(c.admissions == 1000);
  CHECK(c.bytes >= 1000 * 68);
}

TEST_CASE("store: the bucketized index stays exact under churn at its full load") {
  // A table sized for 1,000 rows and kept at 1,000 by erasing one entry per insert: the overflow
  // counts and the backward shift must keep every live id findable, every erased id absent and
  // every probe path short (CLOCK churn at capacity is exactly this).
  const size_t n = 1000;
  row_index idx(n);
  std::mt19937_64 rng(test_seed);
  CAPTURE(test_seed);
  std::vector<uint64_t> live, gone;
  for (size_t i = 0; i < n; ++i) {
    uint64_t id = rng();
    idx.insert(id, row_index::hash_of(id), static_cast<uint32_t>(i));
    live.push_back(id);
  }
  const size_t slots = idx.slots();
  for (int step = 0; step < 50000; ++step) {
    size_t k = rng() % live.size();
    if (rng() % 2) {
      REQUIRE(idx.erase(live[k]));
    } else {  // erase through a lane, as the CLOCK hand does
      size_t s = 0;
      while (idx.row_at(s) == row_index::npos || idx.id_at(s) != live[k])
        ++s;
      idx.erase_slot(s);
    }
    gone.push_back(live[k]);
    live[k] = rng();
    idx.insert(live[k], row_index::hash_of(live[k]), static_cast<uint32_t>(k));
  }
  CHECK(idx.consistent());
  CHECK(idx.slots() == slots);  // never grew
  CHECK(idx.size() == n);
  for (size_t k = 0; k < live.size(); ++k)
    CHECK(idx.find(live[k]) == k);
  for (size_t i = gone.size() - 100; i < gone.size(); ++i)
    CHECK(idx.find(gone[i]) == row_index::npos);
}

TEST_CASE("store: hot ids move to their home bucket and the index stays exact") {
  // At full load ~15% of ids live past their home bucket. Looking up a hot set again and again
  // (find_touch_promote, as lookups and updates do) must bring them home without losing any id,
  // under churn (inserts and erases, through the id and through a lane), and must keep every
  // overflow count and probe path exact (row_index::consistent).
  const size_t n = 4000;
  row_index idx(n);
  std::mt19937_64 rng(test_seed);
  CAPTURE(test_seed);
  std::vector<uint64_t> live;
  for (size_t i = 0; i < n; ++i) {
    live.push_back(rng());
    idx.insert(live[i], row_index::hash_of(live[i]), static_cast<uint32_t>(i));
  }
  auto lane_of = [&](uint64_t id) {
    for (size_t s = 0; s < idx.slots(); ++s)
      if (idx.row_at(s) != row_index::npos && idx.id_at(s) == id)
        return s;
    return idx.slots();
  };
  auto at_home = [&](uint64_t id) {
    return lane_of(id) / row_index::lanes == idx.home_of(row_index::hash_of(id));
  };
  const size_t hot = 400, first_hot = n - hot;  // the last ids in: looked up every round
  auto count_away = [&] {
    size_t a = 0;
    for (size_t k = first_hot; k < n; ++k)
      a += !at_home(live[k]);
    return a;
  };
  const size_t away = count_away();
  CHECK(away > hot / 20);  // the load puts some of them past home
  CAPTURE(away);
  for (size_t k = first_hot; k < n; ++k)
    REQUIRE(idx.find_touch_promote(live[k], row_index::hash_of(live[k])) == k);
  REQUIRE(idx.consistent());
  // One pass brings them home (a home bucket that already holds 5 promoted ids keeps one out).
  CHECK(count_away() * 10 < away);
  for (int round = 0; round < 30; ++round) {
    for (size_t k = first_hot; k < n; ++k) {
      REQUIRE(idx.find_touch_promote(live[k], row_index::hash_of(live[k])) == k);
      CHECK(idx.referenced(lane_of(live[k])));
    }
    for (int c = 0; c < 200; ++c) {  // churn among the cold ids
      size_t k = rng() % first_hot;
      if (rng() % 2) {
        REQUIRE(idx.erase(live[k]));
      } else {
        idx.erase_slot(lane_of(live[k]));
      }
      live[k] = rng();
      idx.insert(live[k], row_index::hash_of(live[k]), static_cast<uint32_t>(k));
    }
    REQUIRE(idx.consistent());
  }
  CHECK(count_away() * 10 < away);
  CHECK(idx.size() == n);
  for (size_t k = 0; k < n; ++k)
    CHECK(idx.find(live[k]) == k);
}

TEST_CASE("store: the index erases without tombstones under churn") {
  row_index idx(0);
  std::mt19937_64 rng(test_seed);
  std::vector<uint64_t> live;
  CAPTURE(test_seed);
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      uint64_t id = rng();
      idx.insert(id, row_index::hash_of(id), static_cast<uint32_t>(step));
      live.push_back(id);
    } else {
      size_t k = rng() % live.size();
      CHECK(idx.erase(live[k]));
      live[k] = live.back();
      live.pop_back();
    }
  }
  CHECK(idx.size() == live.size());
  for (uint64_t id : live)
    CHECK(idx.find(id) != row_index::npos);
  CHECK(idx.find(12345) == row_index::npos);
}

TEST_CASE("store: rows in groups read back the same by lookup, peek and the snapshot walk") {
  // Rows live in groups of 64 (the group's weights, then their states), and dims 8/16/32/64 have
  // their own lookup with a constant-size copy: every dim path and several groups, fp32 and fp16.
  for (int dim : {8, 12, 16, 32, 64}) {
    for (bool fp16 : {false, true}) {
      CAPTURE(dim);
      CAPTURE(fp16);
      embedding_options o = small_options(sparse_optimizer_kind::rowwise_adagrad, dim);
      o.capacity = 0;
      o.precision = fp16 ? weight_precision::fp16 : weight_precision::fp32;
      embedding_table t(o);
      std::vector<uint64_t> ids(300);
      for (size_t i = 0; i < ids.size(); ++i)
        ids[i] = test_seed + 7919 * i;
      const size_t d = static_cast<size_t>(dim);
      std::vector<float> first(ids.size() * d), second(ids.size() * d), peeked(ids.size() * d);
      t.lookup(ids, first.data());
      auto g = grads_for(test_seed + static_cast<uint64_t>(dim), static_cast<int>(ids.size()), dim);
      t.update(ids, g.data());
      t.lookup(ids, second.data());
      t.peek(ids, peeked.data());
      CHECK(second == peeked);
      CHECK(second != first);  // the update moved every row
      // The snapshot walk gives weights then state, the weights as the lookup read them.
      size_t seen = 0;
      t.for_each_row(false, [&](uint64_t id, const std::byte* row) {
        auto at = std::find(ids.begin(), ids.end(), id);
        REQUIRE(at != ids.end());
        size_t i = static_cast<size_t>(at - ids.begin());
        std::vector<float> w(d);
        if (fp16) {
          for (size_t k = 0; k < d; ++k) {
            uint16_t h;
            std::memcpy(&h, row + 2 * k, 2);
            w[k] = f16_to_f32(h);
          }
        } else {
          std::memcpy(w.data(), row, d * 4);
        }
        CHECK(std::equal(w.begin(), w.end(), second.begin() + static_cast<std::ptrdiff_t>(i * d)));
        float state;
        std::memcpy(&state, row + t.layout().weight_bytes, 4);
        CHECK(state > o.initial_accumulator);  // row-wise Adagrad's accumulator grew
        ++seen;
      });
      CHECK(seen == ids.size());
    }
  }
}
