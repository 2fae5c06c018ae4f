// model.type torchscript: the contract checks (each bad module gets its error), and the module as
// a dense_model: its parameters in the flat buffer, gradients against finite differences, and the
// DLRM example equal to the built-in DLRM given the same parameters.
// The modules come from make_modules.py (the build writes them; $SATRAP_TORCH_MODULES names the
// folder). Without libtorch or them, main returns 77 (skipped).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "models/dense/model_zoo.hpp"
#include "models/dense/torchscript.hpp"

namespace satrap {
namespace {

std::string modules_dir() {
  const char* d = std::getenv("SATRAP_TORCH_MODULES");
  return d ? d : "";
}

std::string read(const std::string& name) {
  std::ifstream in(std::filesystem::path(modules_dir()) / name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const torchscript_plugin_api& plugin() {
  auto p = torchscript_plugin();
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error()));
  return **p;
}

const torchscript_contract tiny{13, 4, 16};

std::string inspect_error(const std::string& name) {
  auto r = plugin().inspect(read(name), name, tiny);
  REQUIRE_MESSAGE(!r.ok(), name << " passed the contract check");
  return r.error();
}

dense_model_config config_of(const std::string& name, const torchscript_contract& c) {
  dense_model_config cfg;
  cfg.type = dense_model_type::torchscript;
  cfg.dense_features = c.dense_features;
  cfg.slots = c.slots;
  cfg.dim = c.dim;
  cfg.torchscript = std::make_shared<const std::string>(read(name));
  auto info = plugin().inspect(*cfg.torchscript, name, c);
  REQUIRE_MESSAGE(info.ok(), (info.ok() ? "" : info.error()));
  cfg.torchscript_params = info->params;
  return cfg;
}

struct inputs {
  std::vector<float> dense, pooled, labels;
};
inputs make_inputs(int batch, const torchscript_contract& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.5f);
  inputs in;
  in.dense.resize(size_t(batch) * c.dense_features);
  in.pooled.resize(size_t(batch) * c.slots * c.dim);
  in.labels.resize(size_t(batch));
  for (auto& x : in.dense)
    x = n(rng);
  for (auto& x : in.pooled)
    x = n(rng);
  for (size_t i = 0; i < in.labels.size(); ++i)
    in.labels[i] = float(rng() % 2);
  return in;
}

}  // namespace

TEST_CASE("torchscript: each module that breaks the contract gets an error naming what and why") {
  CHECK(inspect_error("bad_three_args.pt").find("forward takes 3 argument(s)")
        != std::string::npos);
  CHECK(inspect_error("bad_int_arg.pt").find("argument 'slots' is int; expected Tensor")
        != std::string::npos);
  auto two = inspect_error("bad_two_outputs.pt");
  CHECK(two.find("forward returned [3, 2]") != std::string::npos);
  CHECK(two.find("2 task(s), and this job has 1 label(s)") != std::string::npos);
  CHECK(inspect_error("bad_shape.pt").find("forward returned [1, 3]") != std::string::npos);
  CHECK(inspect_error("bad_double.pt").find("parameter 'w.weight' is Double; expected float32")
        != std::string::npos);
  CHECK(inspect_error("bad_tuple.pt").find("forward returned Tuple") != std::string::npos);
  CHECK(inspect_error("bad_no_gradient.pt").find("no gradient would flow") != std::string::npos);
  auto dims = inspect_error("bad_dims.pt");
  CHECK(dims.find("forward failed on dense [3, 13], embeddings [3, 4, 16]") != std::string::npos);
  CHECK(inspect_error("bad_corrupt.pt").find("not a TorchScript archive") != std::string::npos);
  auto newer = inspect_error("bad_newer.pt");
  INFO(newer);
  CHECK(newer.find("made by a newer torch") != std::string::npos);
  CHECK(newer.find("with version 99, but the maximum supported version for reading is")
        != std::string::npos);
  CHECK(newer.find(plugin().torch_version) != std::string::npos);
  // The right module at the wrong shapes: the error says what it got.
  auto r = plugin().inspect(read("dlrm_s8.pt"), "dlrm_s8.pt", tiny);
  REQUIRE(!r.ok());
  CHECK(r.error().find("embeddings [3, 4, 16]") != std::string::npos);
}

TEST_CASE("torchscript: the examples pass the contract and count their parameters") {
  for (auto name : {"dlrm_s4.pt", "dlrm_dot_s4.pt", "dcn_v2_s4.pt", "attention_s4.pt"}) {
    auto r = plugin().inspect(read(name), name, tiny);
    REQUIRE_MESSAGE(r.ok(), name << ": " << (r.ok() ? "" : r.error()));
    CHECK(r->params > 0);
    CHECK(r->tasks == 1);
  }
  CHECK(plugin().inspect(read("dlrm_s4.pt"), "x", tiny)->params
        == 13 * 32 + 32 + 32 * 16 + 16 + (16 + 10 + 4 * 16) + 1);  // bottom; top over dot_cat
}

TEST_CASE("torchscript: gradients match finite differences, for parameters and embeddings") {
  auto cfg = config_of("dcn_v2_s4.pt", tiny);
  auto m = make_dense_model(cfg, 1);
  REQUIRE(m->params().size() == cfg.torchscript_params);
  const int batch = 5;
  auto in = make_inputs(batch, tiny, 3);
  std::vector<float> logits(batch), pooled_grad(in.pooled.size(), 7.0f);
  const float scale = 1.0f / batch;
  double loss = m->forward_backward(batch, in.dense.data(), in.pooled.data(), in.labels.data(),
                                    scale, logits.data(), pooled_grad.data());
  CHECK(std::isfinite(loss));
  std::vector<float> grads(m->grads().begin(), m->grads().end());
  auto loss_at = [&]() {
    std::vector<float> z(batch), g(in.pooled.size());
    return m->forward_backward(batch, in.dense.data(), in.pooled.data(), in.labels.data(), scale,
                               z.data(), g.data())
           * scale;
  };
  const double h = 1e-2;
  std::mt19937_64 rng(11);
  for (int k = 0; k < 12; ++k) {
    size_t i = rng() % m->params().size();
    float keep = m->params()[i];
    m->params()[i] = keep + float(h);
    double up = loss_at();
    m->params()[i] = keep - float(h);
    double down = loss_at();
    m->params()[i] = keep;
    double fd = (up - down) / (2 * h);
    INFO("param " << i << " fd " << fd << " grad " << grads[i]);
    CHECK(std::fabs(fd - grads[i]) <= 2e-3 + 2e-2 * std::fabs(fd));
  }
  for (int k = 0; k < 8; ++k) {
    size_t i = rng() % in.pooled.size();
    float keep = in.pooled[i];
    in.pooled[i] = keep + float(h);
    double up = loss_at();
    in.pooled[i] = keep - float(h);
    double down = loss_at();
    in.pooled[i] = keep;
    double fd = (up - down) / (2 * h);
    INFO("embedding " << i << " fd " << fd << " grad " << pooled_grad[i]);
    CHECK(std::fabs(fd - pooled_grad[i]) <= 2e-3 + 2e-2 * std::fabs(fd));
  }
  // forward (evaluation) gives the training step's logits (no dropout in this module).
  std::vector<float> eval(batch);
  m->forward(batch, in.dense.data(), in.pooled.data(), eval.data());
  for (int i = 0; i < batch; ++i)
    CHECK(eval[i] == doctest::Approx(logits[i]).epsilon(1e-6));
}

TEST_CASE("torchscript: a module with a logit per task trains on several labels, weighted") {
  torchscript_contract two{13, 4, 16, 2, {1.0f, 0.5f}};
  auto info = plugin().inspect(read("bad_two_outputs.pt"), "bad_two_outputs.pt", two);
  REQUIRE_MESSAGE(info.ok(), (info.ok() ? "" : info.error()));
  CHECK(info->tasks == 2);
  torchscript_contract three = two;
  three.tasks = 3;
  three.task_weights.clear();
  auto wrong = plugin().inspect(read("bad_two_outputs.pt"), "bad_two_outputs.pt", three);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().find("this job has 3 label(s) (data.labels); expected [3, 3]")
        != std::string::npos);
  auto cfg = config_of("bad_two_outputs.pt", two);
  cfg.tasks = 2;
  cfg.task_weights = two.task_weights;
  auto m = make_dense_model(cfg, 1);
  const int batch = 4;
  auto in = make_inputs(batch, two, 5);
  in.labels = {1, 0, 0, 0, 1, 1, 0, 1};
  std::vector<float> logits(2 * batch), g(in.pooled.size());
  double loss = m->forward_backward(batch, in.dense.data(), in.pooled.data(), in.labels.data(),
                                    1.0f, logits.data(), g.data());
  // The loss is the weighted sum of each task's BCE at the logits the model returned.
  double want = 0.0;
  for (int i = 0; i < 2 * batch; ++i) {
    double z = logits[i], y = in.labels[i];
    want += (i % 2 ? 0.5 : 1.0) * (std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::fabs(z))));
  }
  CHECK(loss == doctest::Approx(want).epsilon(1e-5));
  std::vector<float> eval(2 * batch);
  m->forward(batch, in.dense.data(), in.pooled.data(), eval.data());
  for (int i = 0; i < 2 * batch; ++i)
    CHECK(eval[i] == doctest::Approx(logits[i]).epsilon(1e-6));
}

TEST_CASE("torchscript: unpooled sequences reach the module with their lengths, and their gradients the positions") {
  // dense 13 + 1 length; 4 pooled slots + 5 positions of one sequence.
  torchscript_contract seq{14, 9, 16, 1, {}, {5}};
  auto wrong = plugin().inspect(read("dlrm_s4.pt"), "dlrm_s4.pt", seq);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().find("expected 4: forward(self, dense: Tensor [B, 13], embeddings: Tensor "
                           "[B, 4, 16], sequences: List[Tensor] ([B, 5, 16]), lengths: Tensor "
                           "int64 [B, 1])")
        != std::string::npos);
  auto plain = plugin().inspect(read("din_s4_l5.pt"), "din_s4_l5.pt", tiny);
  REQUIRE_FALSE(plain.ok());
  CHECK(plain.error().find("forward takes 4 argument(s)") != std::string::npos);
  auto cfg = config_of("din_s4_l5.pt", seq);
  cfg.sequences = seq.sequences;
  auto m = make_dense_model(cfg, 1);
  const int batch = 3;
  auto in = make_inputs(batch, seq, 11);
  const int lengths[batch] = {2, 5, 0};
  for (int i = 0; i < batch; ++i) {
    in.dense[size_t(i) * 14 + 13] = float(lengths[i]);
    for (int j = lengths[i]; j < 5; ++j)  // zeros past the length, as expand_sequences gives
      std::fill_n(in.pooled.begin() + (size_t(i) * 9 + 4 + j) * 16, 16, 0.0f);
  }
  std::vector<float> logits(batch), g(in.pooled.size(), -1.0f);
  m->forward_backward(batch, in.dense.data(), in.pooled.data(), in.labels.data(), 1.0f,
                      logits.data(), g.data());
  for (int i = 0; i < batch; ++i)
    for (int j = 0; j < 5; ++j) {
      double norm = 0.0;
      for (int k = 0; k < 16; ++k)
        norm += std::fabs(g[(size_t(i) * 9 + 4 + j) * 16 + k]);
      CAPTURE(i);
      CAPTURE(j);
      if (j < lengths[i])
        CHECK(norm > 0.0);  // a position within the length gets its gradient
      else
        CHECK(norm == 0.0);  // masked: none
    }
  // A position past the length changes nothing: the logits ignore it.
  auto moved = in;
  std::fill_n(moved.pooled.begin() + (size_t(0) * 9 + 4 + 3) * 16, 16, 3.0f);
  std::vector<float> a(batch), b(batch);
  m->forward(batch, in.dense.data(), in.pooled.data(), a.data());
  m->forward(batch, moved.dense.data(), moved.pooled.data(), b.data());
  CHECK(a[0] == b[0]);
}

TEST_CASE("torchscript: the DLRM example is the built-in DLRM, given the same parameters") {
  for (auto [file, interaction, top] :
       {std::tuple{"dlrm_s4.pt", dlrm_interaction::dot_cat, std::vector<int>{}},
        std::tuple{"dlrm_dot_s4.pt", dlrm_interaction::dot, std::vector<int>{64, 32}}}) {
    CAPTURE(file);
    auto cfg = config_of(file, tiny);
    auto scripted = make_dense_model(cfg, 1);
    dense_model_config builtin_cfg;
    builtin_cfg.dense_features = tiny.dense_features;
    builtin_cfg.slots = tiny.slots;
    builtin_cfg.dim = tiny.dim;
    builtin_cfg.bottom = {32};
    builtin_cfg.top = top;
    builtin_cfg.interaction = interaction;
    auto builtin = make_dense_model(builtin_cfg, 5);
    // Same flat layout: every linear layer W (out x in, row-major) then b, bottom then top.
    REQUIRE(builtin->params().size() == scripted->params().size());
    std::copy(builtin->params().begin(), builtin->params().end(), scripted->params().begin());
    const int batch = 16;
    auto in = make_inputs(batch, tiny, 9);
    std::vector<float> za(batch), zb(batch), ga(in.pooled.size()), gb(in.pooled.size());
    double la = builtin->forward_backward(batch, in.dense.data(), in.pooled.data(),
                                          in.labels.data(), 1.0f / batch, za.data(), ga.data());
    double lb = scripted->forward_backward(batch, in.dense.data(), in.pooled.data(),
                                           in.labels.data(), 1.0f / batch, zb.data(), gb.data());
    CHECK(lb == doctest::Approx(la).epsilon(1e-5));
    for (int i = 0; i < batch; ++i)
      CHECK(zb[i] == doctest::Approx(za[i]).epsilon(1e-4));
    double worst = 0;
    for (size_t i = 0; i < ga.size(); ++i)
      worst = std::max(worst, double(std::fabs(ga[i] - gb[i])));
    for (size_t i = 0; i < builtin->grads().size(); ++i)
      worst = std::max(worst, double(std::fabs(builtin->grads()[i] - scripted->grads()[i])));
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("torchscript: two models from one archive start and step alike, and with_params saves") {
  auto cfg = config_of("attention_s4.pt", tiny);
  auto a = make_dense_model(cfg, 1), b = make_dense_model(cfg, 1);
  REQUIRE(std::equal(a->params().begin(), a->params().end(), b->params().begin()));
  const int batch = 8;
  auto in = make_inputs(batch, tiny, 4);
  std::vector<float> z(batch), g(in.pooled.size());
  a->forward_backward(batch, in.dense.data(), in.pooled.data(), in.labels.data(), 0.1f, z.data(),
                      g.data());
  b->forward_backward(batch, in.dense.data(), in.pooled.data(), in.labels.data(), 0.1f, z.data(),
                      g.data());
  CHECK(std::equal(a->grads().begin(), a->grads().end(), b->grads().begin()));
  // A trained module saved and loaded again holds the trained parameters.
  for (auto& p : a->params())
    p *= 0.5f;
  auto saved = plugin().with_params(*cfg.torchscript, a->params().data(), a->params().size());
  REQUIRE(saved.ok());
  auto cfg2 = cfg;
  cfg2.torchscript = std::make_shared<const std::string>(*saved);
  auto c = make_dense_model(cfg2, 1);
  CHECK(std::equal(a->params().begin(), a->params().end(), c->params().begin()));
  CHECK(!plugin().with_params(*cfg.torchscript, a->params().data(), 3).ok());
}

}  // namespace satrap
