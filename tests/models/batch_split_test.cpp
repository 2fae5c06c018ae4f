// The batch split (models/dense/batch_split.hpp): a step split over threads gives what the unsplit
// step gives (per-sample outputs to float precision, batch sums up to their order), for every
// model of the zoo, is deterministic, and splits only when it may.
#include <doctest/doctest.h>

#include "models/dense/batch_split.hpp"
#include "models/dense/blas_threads.hpp"
#include "models/dense/model_zoo.hpp"
#include "grad_check.hpp"

#include <cmath>
#include <string>
#include <vector>

using namespace satrap;
using namespace satrap::testing;

namespace {

constexpr uint64_t seed = 20261205;

struct batch_inputs {
  std::vector<float> dense, pooled, labels;
};

batch_inputs make_inputs(const dense_model_config& c, int batch) {
  batch_inputs in;
  in.dense = random_vector(size_t(batch) * c.dense_features, seed + 1);
  in.pooled = random_vector(size_t(batch) * c.slots * c.dim, seed + 2, 0.5f);
  in.labels.resize(batch);
  for (int i = 0; i < batch; ++i)
    in.labels[i] = float((i * 7 + 3) % 5 < 2);
  return in;
}

struct step_out {
  double loss = 0;
  std::vector<float> logits, pooled_grad, grads;
};

step_out run_step(dense_model& m, const dense_model_config& c, const batch_inputs& in, int batch) {
  step_out o;
  o.logits.assign(batch, -1.0f);
  o.pooled_grad.assign(size_t(batch) * c.slots * c.dim, -1.0f);  // every element must be written
  o.loss = m.forward_backward(batch, in.dense.data(), in.pooled.data(), in.labels.data(),
                              1.0f / float(batch), o.logits.data(), o.pooled_grad.data());
  auto g = m.grads();
  o.grads.assign(g.begin(), g.end());
  return o;
}

// |a - b| <= tol * (1 + |b|), element by element.
void check_close(const std::vector<float>& a, const std::vector<float>& b, double tol,
                 const char* what) {
  REQUIRE(a.size() == b.size());
  size_t bad = 0, first = a.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(double(a[i]) - b[i]) <= tol * (1.0 + std::fabs(double(b[i]))))) {
      if (bad++ == 0)
        first = i;
    }
  INFO(what, ": ", bad, " of ", a.size(), " differ, first at ", first, " (seed ", seed, ")");
  CHECK(bad == 0);
}

std::vector<dense_model_config> zoo() {
  dense_model_config dlrm;
  dlrm.bottom = {64, 32};
  dlrm.top = {64, 32};
  dense_model_config dcn = dlrm, fm = dlrm, wd = dlrm, dlrm_cat = dlrm;
  dcn.type = dense_model_type::dcn_v2;
  fm.type = dense_model_type::deepfm;
  wd.type = dense_model_type::wide_deep;
  dlrm_cat.interaction = dlrm_interaction::dot_cat;
  return {dlrm, dcn, fm, wd, dlrm_cat};
}

}  // namespace

TEST_CASE("batch split: two parts give the unsplit step's outputs and gradients, every zoo model") {
  blas_threads_lease lease;  // the only trainer in the process: the split may run
  const int batch = 600;     // parts of 300 rows
  for (const auto& c : zoo()) {
    INFO("model ", dense_model_type_name(c.type), " seed ", seed);
    auto whole = make_dense_model(c, seed);
    batch_split_model split(c, seed, 2);
    REQUIRE(split.params().size() == whole->params().size());
    for (size_t i = 0; i < whole->params().size(); ++i)
      REQUIRE(split.params()[i] == whole->params()[i]);
    auto in = make_inputs(c, batch);
    blas_threads_apply(1);
    auto want = run_step(*whole, c, in, batch);
    auto got = run_step(split, c, in, batch);
    CHECK(split.last_parts() == 2);
    check_close(got.logits, want.logits, 1e-5, "logits");
    check_close(got.pooled_grad, want.pooled_grad, 1e-5, "pooled_grad");
    check_close(got.grads, want.grads, 1e-4, "parameter gradients");
    CHECK(got.loss == doctest::Approx(want.loss).epsilon(1e-6));

    // Parameters changed by an optimizer between steps reach every part: the step after a change
    // still matches.
    for (auto& p : split.params())
      p *= 0.5f;
    for (auto& p : whole->params())
      p *= 0.5f;
    want = run_step(*whole, c, in, batch);
    got = run_step(split, c, in, batch);
    check_close(got.logits, want.logits, 1e-5, "logits after a parameter change");
    check_close(got.grads, want.grads, 1e-4, "gradients after a parameter change");

    std::vector<float> fw(batch), fs(batch);
    whole->forward(batch, in.dense.data(), in.pooled.data(), fw.data());
    split.forward(batch, in.dense.data(), in.pooled.data(), fs.data());
    CHECK(split.last_parts() == 2);
    check_close(fs, fw, 1e-5, "forward logits");
  }
}

TEST_CASE(
  "batch split: deterministic for a part count, three parts of uneven rows cover the batch") {
  blas_threads_lease lease;
  auto c = zoo()[0];
  const int batch = 3 * batch_split_min_rows + 2;  // parts of 128, 129, 129 rows
  auto in = make_inputs(c, batch);
  batch_split_model a(c, seed, 3), b(c, seed, 3);
  auto whole = make_dense_model(c, seed);
  blas_threads_apply(1);
  auto want = run_step(*whole, c, in, batch);
  auto ra = run_step(a, c, in, batch), rb = run_step(b, c, in, batch);
  CHECK(a.last_parts() == 3);
  CHECK(ra.logits == rb.logits);
  CHECK(ra.pooled_grad == rb.pooled_grad);
  CHECK(ra.grads == rb.grads);
  CHECK(ra.loss == rb.loss);
  check_close(ra.logits, want.logits, 1e-5, "logits");
  check_close(ra.pooled_grad, want.pooled_grad, 1e-5, "pooled_grad");
  check_close(ra.grads, want.grads, 1e-4, "parameter gradients");
}

TEST_CASE("batch split: no split without the only lease, for small batches, or at one thread") {
  auto c = zoo()[0];
  const int batch = 600;
  auto in = make_inputs(c, batch);
  batch_split_model two(c, seed, 2), one(c, seed, 1);
  auto whole = make_dense_model(c, seed);
  blas_threads_apply(1);
  auto want = run_step(*whole, c, in, batch);
  {
    // No lease (not a trainer) or two leases (two trainers in one process): one part, and the
    // unsplit step's bits.
    auto got = run_step(two, c, in, batch);
    CHECK(two.last_parts() == 1);
    CHECK(got.grads == want.grads);
    blas_threads_lease a, b;
    got = run_step(two, c, in, batch);
    CHECK(two.last_parts() == 1);
    CHECK(got.logits == want.logits);
  }
  blas_threads_lease lease;
  auto got = run_step(one, c, in, batch);
  CHECK(one.last_parts() == 1);
  CHECK(got.grads == want.grads);
  const int small = 2 * batch_split_min_rows - 1;
  auto small_in = make_inputs(c, small);
  run_step(two, c, small_in, small);
  CHECK(two.last_parts() == 1);
  run_step(two, c, in, batch);
  CHECK(two.last_parts() == 2);
  blas_threads_apply(1);
}
