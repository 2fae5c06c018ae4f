// Dense optimizers and the embedding table's sparse optimizers against their formulas.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "models/dense/dense_optimizer.hpp"
#include "models/embedding/embedding_table.hpp"

using namespace satrap;

namespace {

const std::vector<std::vector<float>> kGrads = {{0.5f, -1.0f}, {0.25f, 2.0f}, {-0.75f, 0.1f}};

std::vector<float> run(const dense_optimizer_options& o) {
  std::vector<float> w = {1.0f, -2.0f};
  dense_optimizer opt(o, w.size());
  for (const auto& g : kGrads)
    opt.step(w, g);
  return w;
}

}  // namespace

TEST_CASE("dense sgd with weight decay follows w -= lr*(g + wd*w) over 3 steps") {
  dense_optimizer_options o;
  o.kind = dense_optimizer_kind::sgd;
  o.learning_rate = 0.1f;
  o.weight_decay = 0.01f;
  std::vector<double> w = {1.0, -2.0};
  for (const auto& g : kGrads)
    for (size_t i = 0; i < 2; ++i)
      w[i] -= 0.1 * (g[i] + 0.01 * w[i]);
  auto got = run(o);
  for (size_t i = 0; i < 2; ++i)
    CHECK(got[i] == doctest::Approx(w[i]).epsilon(1e-6));
}

TEST_CASE("dense adagrad follows acc += g^2, w -= lr*g/(sqrt(acc)+eps) over 3 steps") {
  dense_optimizer_options o;
  o.kind = dense_optimizer_kind::adagrad;
  o.learning_rate = 0.1f;
  o.eps = 1e-3f;
  std::vector<double> w = {1.0, -2.0}, acc = {0.0, 0.0};
  for (const auto& g : kGrads)
    for (size_t i = 0; i < 2; ++i) {
      acc[i] += double(g[i]) * g[i];
      w[i] -= 0.1 * g[i] / (std::sqrt(acc[i]) + 1e-3);
    }
  auto got = run(o);
  for (size_t i = 0; i < 2; ++i)
    CHECK(got[i] == doctest::Approx(w[i]).epsilon(1e-6));
}

TEST_CASE("dense adam follows the bias-corrected update over 3 steps") {
  dense_optimizer_options o;
  o.kind = dense_optimizer_kind::adam;
  o.learning_rate = 0.01f;
  o.eps = 1e-8f;
  o.beta1 = 0.9f;
  o.beta2 = 0.999f;
  std::vector<double> w = {1.0, -2.0}, m = {0.0, 0.0}, v = {0.0, 0.0};
  int t = 0;
  for (const auto& g : kGrads) {
    ++t;
    for (size_t i = 0; i < 2; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.999 * v[i] + 0.001 * double(g[i]) * g[i];
      double mhat = m[i] / (1.0 - std::pow(0.9, t)), vhat = v[i] / (1.0 - std::pow(0.999, t));
      w[i] -= 0.01 * mhat / (std::sqrt(vhat) + 1e-8);
    }
  }
  auto got = run(o);
  for (size_t i = 0; i < 2; ++i)
    CHECK(got[i] == doctest::Approx(w[i]).epsilon(1e-5));
}

TEST_CASE(
  "dense ema_decay keeps ema = d_t*ema + (1-d_t)*w after step t, d_t = min(d, (1+t)/(10+t))") {
  dense_optimizer_options o;
  o.kind = dense_optimizer_kind::sgd;
  o.learning_rate = 0.1f;
  o.ema_decay = 0.75f;
  std::vector<float> w = {1.0f, -2.0f};
  dense_optimizer opt(o, w.size());
  CHECK(opt.ema().empty());
  std::vector<double> ref = {1.0, -2.0}, ema;
  int t = 0;
  for (int rep = 0; rep < 12; ++rep)  // past t = 26, where (1+t)/(10+t) reaches 0.75
    for (const auto& g : kGrads) {
      opt.step(w, g);
      ++t;
      for (size_t i = 0; i < 2; ++i)
        ref[i] -= 0.1 * g[i];
      const double d = std::min(0.75, (1.0 + t) / (10.0 + t));
      if (ema.empty())
        ema = ref;
      else
        for (size_t i = 0; i < 2; ++i)
          ema[i] = d * ema[i] + (1.0 - d) * ref[i];
    }
  REQUIRE(opt.ema().size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(w[i] == doctest::Approx(ref[i]).epsilon(1e-6));  // the weights themselves are untouched
    CHECK(opt.ema()[i] == doctest::Approx(ema[i]).epsilon(1e-6));
  }
  // Restore: the optimizer's size or nothing; an optimizer without ema_decay takes none.
  CHECK(opt.set_ema(std::vector<float>{0.5f, 0.25f}));
  CHECK(opt.ema()[1] == 0.25f);
  CHECK(!opt.set_ema(std::vector<float>{0.5f}));
  CHECK(opt.set_ema({}));
  CHECK(opt.ema().empty());
  dense_optimizer off(dense_optimizer_options{}, 2);
  off.step(w, kGrads[0]);
  CHECK(off.ema().empty());
  CHECK(!off.set_ema(std::vector<float>{0.5f, 0.25f}));
}

TEST_CASE("embedding init rows are deterministic and independent of insertion order") {
  embedding_options o;
  o.dim = 5;
  o.init_scale = 0.5f;
  o.seed = 77;
  embedding_table a(o), b(o);
  std::vector<uint64_t> ids_a = {1, 2, 3}, ids_b = {3, 99, 1, 2};
  std::vector<float> out_a(3 * 5), out_b(4 * 5), row(5);
  a.lookup(ids_a, out_a.data());
  b.lookup(ids_b, out_b.data());
  CHECK(a.size() == 3);
  CHECK(b.size() == 4);
  for (int d = 0; d < 5; ++d) {
    CHECK(out_a[0 * 5 + d] == out_b[2 * 5 + d]);  // id 1
    CHECK(out_a[2 * 5 + d] == out_b[0 * 5 + d]);  // id 3
    CHECK(std::abs(out_a[d]) <= 0.5f);
  }
  embedding_init_row(o, 2, row.data());
  CHECK(std::equal(row.begin(), row.end(), out_a.begin() + 5));
  CHECK(row != std::vector<float>(out_a.begin(), out_a.begin() + 5));
  embedding_options other = o;
  other.seed = 78;
  std::vector<float> row2(5);
  embedding_init_row(other, 2, row2.data());
  CHECK(row != row2);
}

TEST_CASE("embedding sgd update follows w -= lr*g") {
  embedding_options o;
  o.dim = 2;
  o.optimizer = sparse_optimizer_kind::sgd;
  o.learning_rate = 0.5f;
  embedding_table t(o);
  std::vector<uint64_t> ids = {10, 20};
  std::vector<float> w0(4), w1(4), g = {1.0f, -2.0f, 0.5f, 0.0f};
  t.lookup(ids, w0.data());
  t.update(ids, g.data());
  t.lookup(ids, w1.data());
  for (int i = 0; i < 4; ++i)
    CHECK(w1[i] == doctest::Approx(w0[i] - 0.5f * g[i]));
}

TEST_CASE("embedding adagrad update follows acc += g^2, w -= lr*g/(sqrt(acc)+eps) over 2 steps") {
  embedding_options o;
  o.dim = 2;
  o.optimizer = sparse_optimizer_kind::adagrad;
  o.learning_rate = 0.1f;
  o.initial_accumulator = 0.5f;
  o.eps = 1e-4f;
  embedding_table t(o);
  std::vector<uint64_t> ids = {7};
  std::vector<float> w(2), g1 = {1.0f, -3.0f}, g2 = {-0.5f, 2.0f};
  t.lookup(ids, w.data());
  std::vector<double> want(w.begin(), w.end()), acc = {0.5, 0.5};
  for (const auto* g : {&g1, &g2}) {
    t.update(ids, g->data());
    for (int d = 0; d < 2; ++d) {
      acc[d] += double((*g)[d]) * (*g)[d];
      want[d] -= 0.1 * (*g)[d] / (std::sqrt(acc[d]) + 1e-4);
    }
  }
  t.lookup(ids, w.data());
  for (int d = 0; d < 2; ++d)
    CHECK(w[d] == doctest::Approx(want[d]).epsilon(1e-6));
}

TEST_CASE("embedding peek reads trained rows and initial rows without inserting") {
  embedding_options o;
  o.dim = 3;
  o.optimizer = sparse_optimizer_kind::sgd;
  o.learning_rate = 1.0f;
  embedding_table t(o);
  std::vector<uint64_t> seen = {5};
  std::vector<float> g = {1.0f, 1.0f, 1.0f}, trained(3);
  t.update(seen, g.data());
  t.lookup(seen, trained.data());
  std::vector<uint64_t> ids = {5, 6};
  std::vector<float> out(6), init6(3);
  t.peek(ids, out.data());
  embedding_init_row(o, 6, init6.data());
  CHECK(std::equal(trained.begin(), trained.end(), out.begin()));
  CHECK(std::equal(init6.begin(), init6.end(), out.begin() + 3));
  CHECK(t.size() == 1);
}
