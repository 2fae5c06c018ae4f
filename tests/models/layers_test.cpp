// Finite-difference gradient checks for the dense layers and every model of the zoo.
#include <doctest/doctest.h>

#include "models/dense/bce.hpp"
#include "models/dense/interaction.hpp"
#include "models/dense/linear.hpp"
#include "models/dense/mlp.hpp"
#include "models/dense/model_zoo.hpp"
#include "models/dense/relu.hpp"
#include "grad_check.hpp"

#include <algorithm>
#include <limits>

using namespace satrap;
using namespace satrap::testing;

TEST_CASE("linear forward matches a hand loop and its gradients match finite differences") {
  const int batch = 3, in = 4, out = 5;
  auto x = random_vector(batch * in, 1), w = random_vector(out * in, 2), b = random_vector(out, 3);
  auto r = random_vector(batch * out, 4);
  std::vector<float> y(batch * out);
  linear_forward(batch, in, out, x.data(), w.data(), b.data(), y.data());
  for (int s = 0; s < batch; ++s)
    for (int o = 0; o < out; ++o) {
      double want = b[o];
      for (int i = 0; i < in; ++i)
        want += double(x[s * in + i]) * w[o * in + i];
      CHECK(y[s * out + o] == doctest::Approx(want).epsilon(1e-5));
    }
  std::vector<float> dx(batch * in), dw(out * in), db(out);
  linear_backward(batch, in, out, x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data());
  auto loss = [&] {
    linear_forward(batch, in, out, x.data(), w.data(), b.data(), y.data());
    return weighted_sum(y, r);
  };
  check_gradient(loss, x, dx, 1e-2f, 1e-4, 1e-3);
  check_gradient(loss, w, dw, 1e-2f, 1e-4, 1e-3);
  check_gradient(loss, b, db, 1e-2f, 1e-4, 1e-3);
}

TEST_CASE("relu gradient matches finite differences away from the kink") {
  std::vector<float> x = {-1.5f, -0.3f, 0.2f, 0.9f, 2.0f, -0.7f};
  auto r = random_vector(x.size(), 5);
  std::vector<float> y(x.size()), dx(x.size());
  relu_forward(x.size(), x.data(), y.data());
  CHECK(y[0] == 0.0f);
  CHECK(y[3] == 0.9f);
  relu_backward(x.size(), y.data(), r.data(), dx.data());
  auto loss = [&] {
    relu_forward(x.size(), x.data(), y.data());
    return weighted_sum(y, r);
  };
  check_gradient(loss, x, dx, 1e-2f, 1e-5, 1e-3);
}

TEST_CASE("mlp gradients w.r.t. params and input match finite differences") {
  for (bool relu_last : {false, true}) {
    mlp net(4, {6, 5, 3}, relu_last);
    const int batch = 5;
    std::vector<float> params(net.param_count());
    net.init(params.data(), 11);
    auto x = random_vector(batch * 4, 12, 2.0f), r = random_vector(batch * 3, 13);
    std::vector<float> out;
    auto loss = [&] {
      const float* y = net.forward(batch, params.data(), x.data());
      out.assign(y, y + batch * 3);
      return weighted_sum(out, r);
    };
    loss();
    std::vector<float> grads(net.param_count()), dx(batch * 4);
    net.backward(batch, params.data(), r.data(), grads.data(), dx.data());
    check_gradient(loss, params, grads, 1e-3f, 2e-4, 1e-2);
    check_gradient(loss, x, dx, 1e-3f, 2e-4, 1e-2);
  }
}

TEST_CASE(
  "mlp dropout: a fixed mask's gradients match finite differences - evaluation ignores it") {
  mlp net(4, {40, 30, 3}, false);
  const int batch = 5;
  std::vector<float> params(net.param_count());
  net.init(params.data(), 11);
  auto x = random_vector(batch * 4, 12, 2.0f), r = random_vector(batch * 3, 13);
  const float* plain = net.forward(batch, params.data(), x.data());
  std::vector<float> eval(plain, plain + batch * 3);
  net.set_dropout(0.5f);
  CHECK(std::equal(eval.begin(), eval.end(), net.forward(batch, params.data(), x.data())));
  net.train_mode(true, 99);  // the same key: the same mask on every forward
  net.forward(batch, params.data(), x.data());
  // About half of the hidden units of a layer are zero after dropout (ReLU zeroes some more).
  std::vector<float> out;
  auto loss = [&] {
    const float* y = net.forward(batch, params.data(), x.data());
    out.assign(y, y + batch * 3);
    return weighted_sum(out, r);
  };
  loss();
  CHECK(out != eval);
  std::vector<float> grads(net.param_count()), dx(batch * 4);
  net.backward(batch, params.data(), r.data(), grads.data(), dx.data());
  // Tolerances of the model checks: scaled units make ReLU kinks a little closer.
  check_gradient(loss, params, grads, 1e-3f, 2e-4, 2e-2);
  check_gradient(loss, x, dx, 1e-3f, 2e-4, 2e-2);
  net.train_mode(false, 0);
  CHECK(std::equal(eval.begin(), eval.end(), net.forward(batch, params.data(), x.data())));
}

TEST_CASE("mlp init is PyTorch-like and deterministic in the seed") {
  mlp net(9, {4}, false);
  std::vector<float> a(net.param_count()), b(net.param_count()), c(net.param_count());
  net.init(a.data(), 1);
  net.init(b.data(), 1);
  net.init(c.data(), 2);
  CHECK(a == b);
  CHECK(a != c);
  for (float v : a)
    CHECK(std::abs(v) <= 1.0f / 3.0f);  // 1/sqrt(fan_in = 9)
}

TEST_CASE("interaction output layout and gradients match finite differences") {
  const int batch = 2, slots = 3, dim = 4;
  CHECK(interaction_output_size(slots, dim) == dim + 6);
  auto x = random_vector(batch * dim, 21), emb = random_vector(batch * slots * dim, 22);
  int width = interaction_output_size(slots, dim);
  std::vector<float> out(batch * width);
  interaction_forward(batch, slots, dim, x.data(), emb.data(), out.data());
  // Sample 1, dot (0,1) = <x_1, e_1,1>, the first dot after the copied x.
  double want = 0.0;
  for (int d = 0; d < dim; ++d)
    want += double(x[dim + d]) * emb[slots * dim + d];
  CHECK(out[width + dim] == doctest::Approx(want).epsilon(1e-5));
  CHECK(out[width + 1] == x[dim + 1]);
  auto r = random_vector(batch * width, 23);
  std::vector<float> dx(batch * dim), demb(batch * slots * dim);
  interaction_backward(batch, slots, dim, x.data(), emb.data(), r.data(), dx.data(), demb.data());
  auto loss = [&] {
    interaction_forward(batch, slots, dim, x.data(), emb.data(), out.data());
    return weighted_sum(out, r);
  };
  check_gradient(loss, x, dx, 1e-2f, 1e-4, 1e-3);
  check_gradient(loss, emb, demb, 1e-2f, 1e-4, 1e-3);
}

TEST_CASE("interaction at dims 16, 8, 32 and 20 and 1 to 26 slots agrees with a double loop") {
  // dim 16 has its own paths (n = 9 unrolled, any n), dims 8 and 32 theirs, 20 the generic one.
  for (int dim : {16, 8, 32, 20})
    for (int slots : {1, 2, 7, 8, 9, 26}) {
      CAPTURE(dim);
      CAPTURE(slots);
      const int batch = 5, n = slots + 1, width = interaction_output_size(slots, dim);
      auto x = random_vector(batch * dim, 41), emb = random_vector(batch * slots * dim, 42);
      auto g = random_vector(static_cast<size_t>(batch) * width, 43);
      std::vector<float> out(batch * width), dx(batch * dim), demb(emb.size());
      interaction_forward(batch, slots, dim, x.data(), emb.data(), out.data());
      interaction_backward(batch, slots, dim, x.data(), emb.data(), g.data(), dx.data(),
                           demb.data());
      for (int s = 0; s < batch; ++s) {
        auto v = [&](int k, int d) {
          return double(k == 0 ? x[s * dim + d] : emb[(s * slots + k - 1) * dim + d]);
        };
        const float* o = out.data() + s * width;
        const float* gs = g.data() + s * width;
        for (int d = 0; d < dim; ++d)
          CHECK(o[d] == x[s * dim + d]);
        std::vector<double> gm(n * n, 0.0);
        int p = dim;
        for (int i = 0; i < n; ++i)
          for (int j = i + 1; j < n; ++j, ++p) {
            double dot = 0;
            for (int d = 0; d < dim; ++d)
              dot += v(i, d) * v(j, d);
            CHECK(o[p] == doctest::Approx(dot).epsilon(1e-5));
            gm[i * n + j] = gm[j * n + i] = gs[p];
          }
        for (int i = 0; i < n; ++i)
          for (int d = 0; d < dim; ++d) {
            double want = i == 0 ? gs[d] : 0.0;
            for (int j = 0; j < n; ++j)
              want += gm[i * n + j] * v(j, d);
            const float got = i == 0 ? dx[s * dim + d] : demb[(s * slots + i - 1) * dim + d];
            CHECK(got == doctest::Approx(want).epsilon(1e-5));
          }
      }
    }
}

TEST_CASE("bce with logits: values, stability and gradient") {
  std::vector<float> z = {0.0f, 2.0f, -3.0f, 100.0f, -100.0f}, y = {1, 0, 0, 1, 1};
  std::vector<float> dz(z.size());
  double total = bce_with_logits(int(z.size()), z.data(), y.data(), 0.5f, dz.data());
  // log 2 + (2 + log(1+e^-2)) + log(1+e^-3) + ~0 + 100
  double want = std::log(2.0) + 2.0 + std::log1p(std::exp(-2.0)) + std::log1p(std::exp(-3.0))
                + std::log1p(std::exp(-100.0)) + 100.0;
  CHECK(total == doctest::Approx(want).epsilon(1e-9));
  CHECK(dz[0] == doctest::Approx(0.5 * (0.5 - 1.0)));
  CHECK(dz[4] == doctest::Approx(-0.5));
  std::vector<float> zz = {0.3f, -1.2f, 2.5f}, yy = {1, 0, 1}, dd(3);
  bce_with_logits(3, zz.data(), yy.data(), 1.0f, dd.data());
  auto loss = [&] { return bce_with_logits(3, zz.data(), yy.data(), 1.0f, nullptr); };
  check_gradient(loss, zz, dd, 1e-3f, 1e-4, 1e-3);
}

namespace {

// forward agrees with forward_backward, the loss is what it returns, and the param grads and
// pooled_grad match central differences of the scaled loss.
void check_model_gradients(const dense_model_config& config, uint64_t seed) {
  auto model = make_dense_model(config, seed);
  REQUIRE(model->params().size() == dense_model_param_count(config));
  const int batch = 4, df = config.dense_features;
  const float scale = 0.25f;
  auto dense = random_vector(batch * df, 31, 1.5f);
  auto pooled = random_vector(static_cast<size_t>(batch) * config.slots * config.dim, 32, 1.0f);
  // pooled_grad starts as NaN: a model must write every element (the trainer hands it a payload
  // buffer that is not zeroed).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t outs = static_cast<size_t>(batch) * config.tasks;
  std::vector<float> labels(outs), logits(outs), pooled_grad(pooled.size(), nan);
  for (size_t i = 0; i < outs; ++i)
    labels[i] = (i * 7 + i / 3) % 3 == 0 ? 1.0f : 0.0f;  // {1, 0, 0, 1} with one task
  double loss0 = model->forward_backward(batch, dense.data(), pooled.data(), labels.data(), scale,
                                         logits.data(), pooled_grad.data());
  std::vector<float> forward_logits(outs);
  model->forward(batch, dense.data(), pooled.data(), forward_logits.data());
  CHECK(forward_logits == logits);
  std::vector<float> unused_logits(outs), unused_grad(pooled.size());
  auto loss = [&] {
    return scale
           * model->forward_backward(batch, dense.data(), pooled.data(), labels.data(), scale,
                                     unused_logits.data(), unused_grad.data());
  };
  CHECK(loss() == doctest::Approx(scale * loss0));
  CHECK(
    std::none_of(pooled_grad.begin(), pooled_grad.end(), [](float g) { return std::isnan(g); }));
  std::fill(pooled_grad.begin(), pooled_grad.end(), nan);
  model->forward_backward(batch, dense.data(), pooled.data(), labels.data(), scale, logits.data(),
                          pooled_grad.data());
  std::vector<float> grads(model->grads().begin(), model->grads().end());
  std::vector<float> params(model->params().begin(), model->params().end());
  auto param_loss = [&] {
    std::copy(params.begin(), params.end(), model->params().begin());
    return loss();
  };
  check_gradient(param_loss, params, grads, 1e-3f, 2e-4, 2e-2);
  check_gradient(loss, pooled, pooled_grad, 1e-3f, 2e-4, 2e-2);
}

dense_model_config small_config(dense_model_type type) {
  dense_model_config config;
  config.type = type;
  config.dense_features = 3;
  config.slots = 3;
  config.dim = 4;
  config.bottom = {5};
  config.top = {6};
  config.cross_layers = 2;
  return config;
}

}  // namespace

TEST_CASE("dlrm forward_backward: param grads and pooled_grad match finite differences") {
  check_model_gradients(small_config(dense_model_type::dlrm), 3);
}

TEST_CASE("dlrm interactions cat and dot_cat: gradients match finite differences, sizes add up") {
  for (auto kind : {dlrm_interaction::cat, dlrm_interaction::dot_cat}) {
    auto config = small_config(dense_model_type::dlrm);
    config.interaction = kind;
    CAPTURE(static_cast<int>(kind));
    check_model_gradients(config, 8);
    auto model = make_dense_model(config, 1);
    CHECK(model->params().size() == dense_model_param_count(config));
  }
  auto c = small_config(dense_model_type::dlrm);
  CHECK(dlrm_top_input(c) == 4 + 6);  // x + 4*3/2 dots
  c.interaction = dlrm_interaction::cat;
  CHECK(dlrm_top_input(c) == 4 * 4);  // x, e1..e3
  c.interaction = dlrm_interaction::dot_cat;
  CHECK(dlrm_top_input(c) == 4 + 6 + 3 * 4);
}

TEST_CASE("dcn_v2 forward_backward: param grads and pooled_grad match finite differences") {
  check_model_gradients(small_config(dense_model_type::dcn_v2), 4);
  auto no_cross = small_config(dense_model_type::dcn_v2);
  no_cross.cross_layers = 0;
  check_model_gradients(no_cross, 5);
}

TEST_CASE("two tasks: dlrm and dcn_v2 output a logit per task, weighted gradients match") {
  for (auto type : {dense_model_type::dlrm, dense_model_type::dcn_v2}) {
    auto config = small_config(type);
    config.tasks = 2;
    config.task_weights = {1.0f, 0.5f};
    CAPTURE(dense_model_type_name(type));
    CHECK(dense_model_tasks_error(config).empty());
    check_model_gradients(config, 9);
    auto one = small_config(type);
    // The last layer has one output row more per task: (top's last hidden + 1) floats each.
    CHECK(dense_model_param_count(config) == dense_model_param_count(one) + 7);
  }
  auto fm = small_config(dense_model_type::deepfm);
  fm.tasks = 2;
  CHECK(dense_model_tasks_error(fm).find("one logit") != std::string::npos);
  auto weights = small_config(dense_model_type::dlrm);
  weights.tasks = 2;
  weights.task_weights = {1.0f};
  CHECK(dense_model_tasks_error(weights).find("2 task weights") != std::string::npos);
}

TEST_CASE("bce over tasks: weights scale each task's loss and gradient") {
  std::vector<float> z = {0.3f, -1.2f, 2.0f, 0.1f}, y = {1, 0, 0, 1}, w = {2.0f, 0.5f};
  std::vector<float> d(4), d1(1);
  double total = bce_with_logits_tasks(2, 2, z.data(), y.data(), w.data(), 0.5f, d.data());
  double want = 0.0;
  for (int i = 0; i < 4; ++i) {
    double one = bce_with_logits(1, &z[i], &y[i], 0.5f, d1.data());
    want += w[i % 2] * one;
    CHECK(d[i] == doctest::Approx(w[i % 2] * d1[0]));
  }
  CHECK(total == doctest::Approx(want));
  // One task, no weights: the plain formula.
  std::vector<float> a(4), b(4);
  CHECK(bce_with_logits_tasks(4, 1, z.data(), y.data(), nullptr, 1.0f, a.data())
        == bce_with_logits(4, z.data(), y.data(), 1.0f, b.data()));
  CHECK(a == b);
}

TEST_CASE("deepfm forward_backward: param grads and pooled_grad match finite differences") {
  check_model_gradients(small_config(dense_model_type::deepfm), 6);
}

TEST_CASE("wide_deep forward_backward: param grads and pooled_grad match finite differences") {
  auto config = small_config(dense_model_type::wide_deep);
  config.top = {6, 5};
  check_model_gradients(config, 7);
}

TEST_CASE("deepfm's FM term is the sum of pairwise field dot products") {
  // With every parameter zero but the bottom MLP's last bias, the logit is the FM term alone.
  auto config = small_config(dense_model_type::deepfm);
  auto model = make_dense_model(config, 1);
  std::fill(model->params().begin(), model->params().end(), 0.0f);
  // bottom = dense_features -> 5 -> dim: its last bias starts after the two weight matrices.
  const size_t last_bias = 5 * 3 + 5 + 4 * 5;
  std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.25f};
  std::copy(x.begin(), x.end(), model->params().begin() + last_bias);
  auto dense = random_vector(3, 51), pooled = random_vector(3 * 4, 52);
  float logit = 0.0f;
  model->forward(1, dense.data(), pooled.data(), &logit);
  std::vector<const float*> fields = {x.data(), &pooled[0], &pooled[4], &pooled[8]};
  double want = 0.0;
  for (size_t i = 0; i < fields.size(); ++i)
    for (size_t j = i + 1; j < fields.size(); ++j)
      for (int k = 0; k < 4; ++k)
        want += static_cast<double>(fields[i][k]) * fields[j][k];
  CHECK(logit == doctest::Approx(want).epsilon(1e-5));
}

TEST_CASE("dense_model_param_count matches every model of the zoo") {
  for (auto type : {dense_model_type::dlrm, dense_model_type::dcn_v2, dense_model_type::deepfm,
                    dense_model_type::wide_deep}) {
    dense_model_config config;  // the defaults of satrap train
    config.type = type;
    CAPTURE(dense_model_type_name(type));
    CHECK(make_dense_model(config, 1)->params().size() == dense_model_param_count(config));
  }
}

TEST_CASE("dlrm grads are overwritten, not accumulated, and init is deterministic") {
  dense_model_config config;
  config.dense_features = 2;
  config.slots = 2;
  config.dim = 3;
  config.bottom = {4};
  config.top = {4};
  auto a = make_dense_model(config, 9), b = make_dense_model(config, 9);
  REQUIRE(a->params().size() == b->params().size());
  CHECK(std::equal(a->params().begin(), a->params().end(), b->params().begin()));
  auto dense = random_vector(4, 41), pooled = random_vector(2 * 2 * 3, 42);
  std::vector<float> labels = {1, 0}, logits(2), pg(pooled.size());
  a->forward_backward(2, dense.data(), pooled.data(), labels.data(), 0.5f, logits.data(),
                      pg.data());
  std::vector<float> first(a->grads().begin(), a->grads().end());
  a->forward_backward(2, dense.data(), pooled.data(), labels.data(), 0.5f, logits.data(),
                      pg.data());
  CHECK(std::equal(first.begin(), first.end(), a->grads().begin()));
}
