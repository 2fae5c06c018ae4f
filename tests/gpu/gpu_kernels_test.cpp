// The CUDA path against its CPU twins (models/cuda/cuda_kernels.hpp): every kernel on random
// deterministic inputs under a per-kernel tolerance, the GPU DLRM's forward_backward and optimizer
// step against the CPU DLRM's, and a one-rank NCCL all-reduce. Without a CUDA device only the
// test suite "host" runs (error messages), then the binary prints why and exits 77 (CTest: skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <cblas.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "models/cuda/cuda_dlrm.hpp"
#include "models/cuda/cuda_kernels.hpp"
#include "models/cuda/cuda_util.hpp"
#include "models/cuda/nccl_comm.hpp"
#include "models/dense/bce.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/interaction.hpp"
#include "models/dense/linear.hpp"
#include "models/dense/model_zoo.hpp"
#include "models/dense/relu.hpp"
#include "models/embedding/pooling.hpp"
#include "models/embedding/sparse_kernels.hpp"

using namespace satrap;

namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

#define REQUIRE_OK(expr)                                     \
  do {                                                       \
    const auto& require_ok_status_ = (expr);                 \
    INFO(#expr);                                             \
    REQUIRE_MESSAGE(require_ok_status_.ok(),                 \
                    (require_ok_status_.ok() ? std::string() \
                                             : require_ok_status_.error())); \
  } while (0)

template <class T>
device_array<T> to_device(const std::vector<T>& h) {
  device_array<T> d;
  REQUIRE_OK(d.reserve(std::max<size_t>(h.size(), 1)));
  REQUIRE_OK(SATRAP_CUDA_CHECK(
      cudaMemcpy(d.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)));
  return d;
}

template <class T>
std::vector<T> to_host(const device_array<T>& d, size_t n) {
  std::vector<T> h(n);
  REQUIRE_OK(SATRAP_CUDA_CHECK(cudaDeviceSynchronize()));
  REQUIRE_OK(SATRAP_CUDA_CHECK(
      cudaMemcpy(h.data(), d.data(), n * sizeof(T), cudaMemcpyDeviceToHost)));
  return h;
}

// |gpu - cpu| <= atol + rtol * |cpu| everywhere; reports the worst element.
void check_close(const char* what, const std::vector<float>& gpu, const std::vector<float>& cpu,
                 double atol, double rtol) {
  REQUIRE(gpu.size() == cpu.size());
  size_t worst = 0;
  double worst_excess = -1.0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    double err = std::abs(double{gpu[i]} - double{cpu[i]});
    double excess = err - (atol + rtol * std::abs(double{cpu[i]}));
    if (!(excess <= 0.0) || excess > worst_excess) {  // NaN counts as the worst
      worst_excess = std::isnan(excess) ? 1e30 : excess;
      worst = i;
    }
  }
  INFO(what << ": worst at " << worst << ": gpu " << gpu[worst] << " cpu " << cpu[worst]
            << " (atol " << atol << ", rtol " << rtol << ")");
  CHECK(worst_excess <= 0.0);
}

// ||gpu - cpu|| <= rtol * ||cpu|| (L2): for whole-network gradients, where a ReLU whose input is
// within rounding of 0 may open on one side and not the other and move a few elements a lot.
void check_rel_l2(const char* what, const std::vector<float>& gpu, const std::vector<float>& cpu,
                  double rtol) {
  REQUIRE(gpu.size() == cpu.size());
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    double d = double{gpu[i]} - double{cpu[i]};
    diff += d * d;
    norm += double{cpu[i]} * cpu[i];
  }
  double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
  INFO(what << ": relative L2 error " << rel << " (rtol " << rtol << ")");
  CHECK(rel <= rtol);
}

}  // namespace

// ---- without a GPU too --------------------------------------------------------------------------

TEST_SUITE("host") {
  TEST_CASE("CUDA errors become messages with file:line, not aborts") {
    cuda_status s = SATRAP_CUDA_CHECK(cudaErrorInvalidValue);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().find("gpu_kernels_test.cpp:") != std::string::npos);
    CHECK(s.error().find("cudaErrorInvalidValue") != std::string::npos);
    CHECK(SATRAP_CUDA_CHECK(cudaSuccess).ok());
    cuda_status b = SATRAP_CUBLAS_CHECK(7);  // CUBLAS_STATUS_INVALID_VALUE
    REQUIRE_FALSE(b.ok());
    CHECK(b.error().find("CUBLAS_STATUS_INVALID_VALUE") != std::string::npos);
    CHECK_FALSE(SATRAP_NCCL_CHECK(4).ok());  // ncclInvalidArgument
  }

  TEST_CASE("make_cuda_dlrm refuses other model types and missing devices") {
    dense_model_config config;
    config.type = dense_model_type::deepfm;
    auto m = make_cuda_dlrm(config, 1);
    REQUIRE_FALSE(m.ok());
    CHECK(m.error().find("only dlrm") != std::string::npos);
    config.type = dense_model_type::dlrm;
    auto far = make_cuda_dlrm(config, 1, 1 << 20);
    CHECK_FALSE(far.ok());
    if (!cuda_device_count().ok()) {  // no GPU here: the factory says so instead of failing later
      auto none = make_cuda_dlrm(config, 1);
      REQUIRE_FALSE(none.ok());
      CHECK(none.error().find("no usable CUDA device") != std::string::npos);
    }
  }

  TEST_CASE("nccl_comm checks the unique id's size") {
    std::vector<uint8_t> short_id(16, 0);
    auto c = nccl_comm::init_rank(short_id, 1, 0, 0);
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().find("expected 128") != std::string::npos);
    CHECK(nccl_comm::version() > 0);
  }
}

// ---- kernels against their CPU twins ------------------------------------------------------------

TEST_CASE("bias + ReLU forward matches linear_forward's bias then relu_forward") {
  const int batch = 77, out = 45;
  auto y0 = random_floats(size_t{batch} * out, 1);
  auto b = random_floats(out, 2);
  for (bool relu : {false, true}) {
    std::vector<float> cpu = y0;
    for (int i = 0; i < batch; ++i)
      for (int o = 0; o < out; ++o) cpu[size_t(i) * out + o] += b[o];
    if (relu) relu_forward(cpu.size(), cpu.data(), cpu.data());
    auto dy = to_device(y0);
    auto db = to_device(b);
    REQUIRE_OK(cuda_bias_relu_forward(nullptr, batch, out, db.data(), dy.data(), relu));
    check_close("bias_relu_forward", to_host(dy, cpu.size()), cpu, 0.0, 0.0);  // one rounding each
  }
}

TEST_CASE("fused ReLU backward + bias grad matches relu_backward and linear_backward's db") {
  for (int batch : {1, 33, 1000}) {
    const int out = 70;
    auto y = random_floats(size_t(batch) * out, 3);  // about half are <= 0
    auto g = random_floats(size_t(batch) * out, 4);
    for (bool relu : {false, true}) {
      std::vector<float> cpu_dy = g, cpu_db(out, 0.0f);
      if (relu) relu_backward(cpu_dy.size(), y.data(), cpu_dy.data(), cpu_dy.data());
      for (int i = 0; i < batch; ++i)
        for (int o = 0; o < out; ++o) cpu_db[o] += cpu_dy[size_t(i) * out + o];
      auto dy_d = to_device(y);
      auto dg = to_device(g);
      device_array<float> ddb;
      REQUIRE_OK(ddb.reserve(out));
      REQUIRE_OK(cuda_relu_backward_bias_grad(nullptr, batch, out, relu ? dy_d.data() : nullptr,
                                              dg.data(), ddb.data()));
      check_close("relu_backward", to_host(dg, cpu_dy.size()), cpu_dy, 0.0, 0.0);
      check_close("bias_grad", to_host(ddb, out), cpu_db, 1e-5, 1e-5);  // another summation order
    }
  }
}

TEST_CASE("cuda_gemm matches cblas_sgemm (row-major) for every transpose") {
  auto blas = cublas_handle::create(nullptr);
  REQUIRE_OK(blas);
  const int m = 37, n = 29, k = 53;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      // A is m x k (stored k x m when transposed); B is k x n (n x k when transposed).
      int lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
      auto a = random_floats(size_t(m) * k, 10 + ta);
      auto b = random_floats(size_t(k) * n, 20 + tb);
      auto c = random_floats(size_t(m) * n, 30);
      std::vector<float> cpu = c;
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                  n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, cpu.data(), ldc);
      auto da = to_device(a), db = to_device(b), dc = to_device(c);
      REQUIRE_OK(cuda_gemm(blas.value(), ta, tb, m, n, k, 0.5f, da.data(), lda, db.data(), ldb, 2.0f,
                           dc.data(), ldc));
      INFO("trans_a " << ta << " trans_b " << tb);
      check_close("gemm", to_host(dc, cpu.size()), cpu, 1e-5, 1e-5);
    }
}

TEST_CASE("cuda_linear_forward / backward match linear_forward / backward") {
  auto blas = cublas_handle::create(nullptr);
  REQUIRE_OK(blas);
  const int batch = 65, in = 47, out = 31;
  auto x = random_floats(size_t(batch) * in, 40);
  auto w = random_floats(size_t(out) * in, 41);
  auto b = random_floats(out, 42);
  auto dy = random_floats(size_t(batch) * out, 43);
  for (bool relu : {false, true}) {
    std::vector<float> y(size_t(batch) * out);
    linear_forward(batch, in, out, x.data(), w.data(), b.data(), y.data());
    if (relu) relu_forward(y.size(), y.data(), y.data());
    auto dx = to_device(x), dw = to_device(w), dbias = to_device(b);
    device_array<float> dyout;
    REQUIRE_OK(dyout.reserve(y.size()));
    REQUIRE_OK(cuda_linear_forward(blas.value(), batch, in, out, dx.data(), dw.data(), dbias.data(),
                                   dyout.data(), relu));
    check_close("linear_forward", to_host(dyout, y.size()), y, 1e-5, 1e-5);
  }
  std::vector<float> gx(size_t(batch) * in), gw(size_t(out) * in), gb(out);
  linear_backward(batch, in, out, x.data(), w.data(), dy.data(), gx.data(), gw.data(), gb.data());
  auto dx = to_device(x), dw = to_device(w), ddy = to_device(dy);
  device_array<float> dgx, dgw, dgb;
  REQUIRE_OK(dgx.reserve(gx.size()));
  REQUIRE_OK(dgw.reserve(gw.size()));
  REQUIRE_OK(dgb.reserve(gb.size()));
  REQUIRE_OK(cuda_linear_backward(blas.value(), batch, in, out, dx.data(), dw.data(), ddy.data(),
                                  dgx.data(), dgw.data(), dgb.data()));
  check_close("linear_backward dx", to_host(dgx, gx.size()), gx, 1e-5, 1e-5);
  check_close("linear_backward dw", to_host(dgw, gw.size()), gw, 1e-5, 1e-5);
  check_close("linear_backward db", to_host(dgb, gb.size()), gb, 1e-5, 1e-5);
  check_close("dy untouched", to_host(ddy, dy.size()), dy, 0.0, 0.0);
}

TEST_CASE("interaction forward / backward match their CPU twins") {
  struct shape { int batch, slots, dim; };
  for (shape s : {shape{37, 5, 7}, shape{8, 26, 16}, shape{3, 1, 4}}) {
    INFO("batch " << s.batch << " slots " << s.slots << " dim " << s.dim);
    const int width = interaction_output_size(s.slots, s.dim);
    auto x = random_floats(size_t(s.batch) * s.dim, 50);
    auto emb = random_floats(size_t(s.batch) * s.slots * s.dim, 51);
    auto dout = random_floats(size_t(s.batch) * width, 52);
    std::vector<float> out(size_t(s.batch) * width), gx(x.size()), gemb(emb.size());
    interaction_forward(s.batch, s.slots, s.dim, x.data(), emb.data(), out.data());
    interaction_backward(s.batch, s.slots, s.dim, x.data(), emb.data(), dout.data(), gx.data(),
                         gemb.data());
    auto dx = to_device(x), demb = to_device(emb), ddout = to_device(dout);
    device_array<float> dz, dgx, dgemb;
    REQUIRE_OK(dz.reserve(out.size()));
    REQUIRE_OK(dgx.reserve(gx.size()));
    REQUIRE_OK(dgemb.reserve(gemb.size()));
    REQUIRE_OK(cuda_interaction_forward(nullptr, s.batch, s.slots, s.dim, dx.data(), demb.data(),
                                        dz.data()));
    REQUIRE_OK(cuda_interaction_backward(nullptr, s.batch, s.slots, s.dim, dx.data(), demb.data(),
                                         ddout.data(), dgx.data(), dgemb.data()));
    check_close("interaction_forward", to_host(dz, out.size()), out, 1e-5, 1e-5);
    check_close("interaction_backward dx", to_host(dgx, gx.size()), gx, 1e-5, 1e-5);
    check_close("interaction_backward demb", to_host(dgemb, gemb.size()), gemb, 1e-5, 1e-5);
  }
}

TEST_CASE("pooling forward / backward (sum, mean, empty bags) match pool_forward / backward") {
  const int dim = 12, n_unique = 40, bags = 300;
  std::mt19937 rng(60);
  std::vector<uint32_t> offsets{0}, inverse;
  for (int b = 0; b < bags; ++b) {
    int len = b % 7 == 0 ? 0 : static_cast<int>(rng() % 9);
    for (int k = 0; k < len; ++k) inverse.push_back(rng() % n_unique);
    offsets.push_back(static_cast<uint32_t>(inverse.size()));
  }
  auto rows = random_floats(size_t(n_unique) * dim, 61);
  auto gout = random_floats(size_t(bags) * dim, 62);
  auto doff = to_device(offsets), dinv = to_device(inverse);
  auto drows = to_device(rows), dgout = to_device(gout);
  for (pooling mode : {pooling::sum, pooling::mean}) {
    INFO("mean " << (mode == pooling::mean));
    std::vector<float> out(size_t(bags) * dim), gu(size_t(n_unique) * dim, 0.0f);
    pool_forward(mode, dim, offsets, inverse, rows.data(), out.data());
    pool_backward(mode, dim, offsets, inverse, gout.data(), gu.data());
    device_array<float> dout, dgu;
    REQUIRE_OK(dout.reserve(out.size()));
    REQUIRE_OK(dgu.reserve(gu.size()));
    REQUIRE_OK(SATRAP_CUDA_CHECK(cudaMemset(dgu.data(), 0, gu.size() * sizeof(float))));
    REQUIRE_OK(cuda_pool_forward(nullptr, mode, bags, dim, doff.data(), dinv.data(), drows.data(),
                                 dout.data()));
    REQUIRE_OK(cuda_pool_backward(nullptr, mode, bags, dim, doff.data(), dinv.data(), dgout.data(),
                                  dgu.data()));
    check_close("pool_forward", to_host(dout, out.size()), out, 1e-6, 1e-6);  // same order
    check_close("pool_backward", to_host(dgu, gu.size()), gu, 1e-5, 1e-5);   // atomics
  }
}

TEST_CASE("BCE with logits matches bce_with_logits") {
  const int batch = 3001;
  auto logits = random_floats(batch, 70, -30.0f, 30.0f);
  logits[0] = 0.0f;
  logits[1] = 80.0f;
  logits[2] = -80.0f;
  auto labels = random_floats(batch, 71, 0.0f, 1.0f);
  for (float& y : labels) y = y < 0.5f ? 0.0f : 1.0f;
  labels[3] = 0.25f;  // soft labels work too
  std::vector<float> dl(batch);
  double loss = bce_with_logits(batch, logits.data(), labels.data(), 1.0f / batch, dl.data());
  auto dlog = to_device(logits), dlab = to_device(labels);
  device_array<float> ddl;
  device_array<double> dloss;
  REQUIRE_OK(ddl.reserve(batch));
  REQUIRE_OK(dloss.reserve(1));
  REQUIRE_OK(cuda_bce_with_logits(nullptr, batch, dlog.data(), dlab.data(), 1.0f / batch,
                                  ddl.data(), dloss.data()));
  double gpu_loss = to_host(dloss, 1)[0];
  CHECK(gpu_loss == doctest::Approx(loss).epsilon(1e-12));
  check_close("bce dlogits", to_host(ddl, batch), dl, 1e-9, 1e-6);
}

TEST_CASE("dense optimizer steps (SGD, Adagrad, Adam, weight decay) match dense_optimizer") {
  const size_t n = 5000;
  for (dense_optimizer_kind kind :
       {dense_optimizer_kind::sgd, dense_optimizer_kind::adagrad, dense_optimizer_kind::adam}) {
    INFO("kind " << static_cast<int>(kind));
    dense_optimizer_options o;
    o.kind = kind;
    o.learning_rate = 0.01f;
    o.weight_decay = 1e-3f;
    dense_optimizer cpu(o, n);
    auto w = random_floats(n, 80);
    auto dw = to_device(w);
    device_array<float> dg, dm, dv;
    REQUIRE_OK(dg.reserve(n));
    REQUIRE_OK(dm.reserve(n));
    REQUIRE_OK(dv.reserve(n));
    REQUIRE_OK(SATRAP_CUDA_CHECK(cudaMemset(dm.data(), 0, n * sizeof(float))));
    REQUIRE_OK(SATRAP_CUDA_CHECK(cudaMemset(dv.data(), 0, n * sizeof(float))));
    for (int step = 1; step <= 4; ++step) {
      auto g = random_floats(n, 81 + step);
      cpu.step(w, g);
      REQUIRE_OK(SATRAP_CUDA_CHECK(
          cudaMemcpy(dg.data(), g.data(), n * sizeof(float), cudaMemcpyHostToDevice)));
      REQUIRE_OK(cuda_dense_optimizer_step(nullptr, o, step, n, dw.data(), dg.data(), dm.data(),
                                           dv.data()));
    }
    check_close("params", to_host(dw, n), w, 1e-6, 1e-5);
  }
}

TEST_CASE("sparse Adagrad row update matches the scalar sparse kernel") {
  const int dim = 16, table_rows = 100, rows = 30;
  step_params p;
  p.kind = sparse_optimizer_kind::adagrad;
  p.dim = dim;
  p.lr = 0.05f;
  p.eps = 1e-8f;
  p.weight_decay = 1e-4f;
  p.clip = 0.9f;
  auto w = random_floats(size_t(table_rows) * dim, 90);
  auto acc = random_floats(size_t(table_rows) * dim, 91, 0.0f, 0.5f);
  auto g = random_floats(size_t(rows) * dim, 92, -3.0f, 3.0f);
  std::vector<uint32_t> ids;
  for (int r = 0; r < rows; ++r) ids.push_back(static_cast<uint32_t>((r * 37 + 5) % table_rows));
  auto dw = to_device(w), dacc = to_device(acc), dg = to_device(g);
  auto dids = to_device(ids);
  for (int r = 0; r < rows; ++r)
    sparse_kernels_scalar().step(p, w.data() + size_t(ids[r]) * dim, acc.data() + size_t(ids[r]) * dim,
                                 g.data() + size_t(r) * dim);
  REQUIRE_OK(cuda_sparse_adagrad_step(nullptr, rows, dim, dids.data(), p.lr, p.eps,
                                      p.weight_decay, p.clip, dw.data(), dacc.data(), dg.data()));
  check_close("weights", to_host(dw, w.size()), w, 1e-6, 1e-5);
  check_close("accumulators", to_host(dacc, acc.size()), acc, 1e-6, 1e-5);
}

// ---- the GPU DLRM against the CPU DLRM ----------------------------------------------------------

TEST_CASE("cuda_dlrm: same init, forward_backward and optimizer step as the CPU DLRM") {
  dense_model_config config;
  config.dense_features = 13;
  config.slots = 6;
  config.dim = 8;
  config.bottom = {32, 16};
  config.top = {48, 24};
  const uint64_t seed = 7;
  const int batch = 129;
  auto cpu = make_dlrm(config, seed);
  auto gpu = make_cuda_dlrm(config, seed);
  REQUIRE_OK(gpu);
  cuda_dlrm& g = *gpu.value();
  REQUIRE(g.param_count() == cpu->params().size());
  check_close("init params", std::vector<float>(g.params().begin(), g.params().end()),
              std::vector<float>(cpu->params().begin(), cpu->params().end()), 0.0, 0.0);

  auto dense = random_floats(size_t(batch) * config.dense_features, 100);
  auto pooled = random_floats(size_t(batch) * config.slots * config.dim, 101);
  auto labels = random_floats(batch, 102, 0.0f, 1.0f);
  for (float& y : labels) y = y < 0.3f ? 1.0f : 0.0f;
  const float scale = 1.0f / batch;

  // SGD: Adam's and Adagrad's first steps are about lr * sign(g), which rounding noise can flip
  // for a gradient near 0; their kernels are compared on equal gradients above.
  dense_optimizer_options o;
  o.kind = dense_optimizer_kind::sgd;
  o.learning_rate = 0.01f;
  dense_optimizer cpu_opt(o, cpu->params().size());
  REQUIRE_OK(g.set_optimizer(o));

  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    std::vector<float> cl(batch), gl(batch);
    std::vector<float> cpg(pooled.size()), gpg(pooled.size());
    double closs = cpu->forward_backward(batch, dense.data(), pooled.data(), labels.data(), scale,
                                         cl.data(), cpg.data());
    auto gloss = g.try_forward_backward(batch, dense.data(), pooled.data(), labels.data(), scale,
                                        gl.data(), gpg.data());
    REQUIRE_OK(gloss);
    CHECK(gloss.value() == doctest::Approx(closs).epsilon(1e-4));
    check_close("logits", gl, cl, 1e-4, 1e-4);
    check_rel_l2("pooled_grad", gpg, cpg, 1e-5);
    auto gg = g.grads();
    check_rel_l2("grads", std::vector<float>(gg.begin(), gg.end()),
                 std::vector<float>(cpu->grads().begin(), cpu->grads().end()), 1e-5);
    cpu_opt.step(cpu->params(), cpu->grads());
    REQUIRE_OK(g.optimizer_step());  // uploads the host grads (grads() marked them newer)
    CHECK(g.optimizer_steps() == step + 1);
    auto gp = g.params();
    check_close("params after step", std::vector<float>(gp.begin(), gp.end()),
                std::vector<float>(cpu->params().begin(), cpu->params().end()), 2e-5, 1e-4);
    // Keep the two in lock step: copy the CPU parameters into the GPU model's host mirror,
    // which params() marked as newer (the next device use uploads them).
    std::copy(cpu->params().begin(), cpu->params().end(), gp.begin());
  }

  std::vector<float> cl(batch), gl(batch);
  cpu->forward(batch, dense.data(), pooled.data(), cl.data());
  REQUIRE_OK(g.try_forward(batch, dense.data(), pooled.data(), gl.data()));
  check_close("forward", gl, cl, 1e-4, 1e-4);

  // A smaller batch after a larger one reuses the buffers.
  std::vector<float> c5(5), g5(5), cpg5(5 * config.slots * config.dim), gpg5(cpg5.size());
  double closs5 = cpu->forward_backward(5, dense.data(), pooled.data(), labels.data(), 1.0f, c5.data(),
                                        cpg5.data());
  double gloss5 = g.forward_backward(5, dense.data(), pooled.data(), labels.data(), 1.0f,
                                     g5.data(), gpg5.data());
  CHECK(g.last_error().empty());
  CHECK(gloss5 == doctest::Approx(closs5).epsilon(1e-4));
  check_rel_l2("pooled_grad batch 5", gpg5, cpg5, 1e-5);
  REQUIRE_OK(g.sync_to_host());
}

TEST_CASE("cuda_dlrm on the Criteo shape matches the CPU DLRM") {
  dense_model_config config;
  config.slots = 26;
  config.dim = 16;
  config.bottom = {512, 256, 64};
  config.top = {512, 256};
  const int batch = 256;
  auto cpu = make_dlrm(config, 11);
  auto gpu = make_cuda_dlrm(config, 11);
  REQUIRE_OK(gpu);
  auto dense = random_floats(size_t(batch) * config.dense_features, 110);
  auto pooled = random_floats(size_t(batch) * config.slots * config.dim, 111, -0.1f, 0.1f);
  auto labels = random_floats(batch, 112, 0.0f, 1.0f);
  for (float& y : labels) y = y < 0.25f ? 1.0f : 0.0f;
  std::vector<float> cl(batch), gl(batch), cpg(pooled.size()), gpg(pooled.size());
  double closs = cpu->forward_backward(batch, dense.data(), pooled.data(), labels.data(),
                                       1.0f / batch, cl.data(), cpg.data());
  auto gloss = gpu.value()->try_forward_backward(batch, dense.data(), pooled.data(), labels.data(),
                                                 1.0f / batch, gl.data(), gpg.data());
  REQUIRE_OK(gloss);
  CHECK(gloss.value() == doctest::Approx(closs).epsilon(1e-4));
  check_close("logits", gl, cl, 1e-4, 1e-3);
  check_rel_l2("pooled_grad", gpg, cpg, 1e-4);
  auto gg = gpu.value()->grads();
  check_rel_l2("grads", std::vector<float>(gg.begin(), gg.end()),
               std::vector<float>(cpu->grads().begin(), cpu->grads().end()), 1e-4);
}

// ---- NCCL ---------------------------------------------------------------------------------------

TEST_CASE("a one-rank NCCL communicator all-reduces (sum) in place and out of place") {
  auto id = nccl_comm::make_unique_id();
  REQUIRE_OK(id);
  REQUIRE(id.value().size() == 128);
  auto comm = nccl_comm::init_rank(id.value(), 1, 0, 0);
  REQUIRE_OK(comm);
  CHECK(comm.value()->size() == 1);
  CHECK(comm.value()->rank() == 0);
  cudaStream_t stream = nullptr;
  REQUIRE_OK(SATRAP_CUDA_CHECK(cudaStreamCreate(&stream)));
  const size_t n = 100003;
  auto h = random_floats(n, 120);
  auto d = to_device(h);
  device_array<float> out;
  REQUIRE_OK(out.reserve(n));
  REQUIRE_OK(comm.value()->all_reduce_sum(d.data(), d.data(), n, stream));
  REQUIRE_OK(comm.value()->all_reduce_sum(d.data(), out.data(), n, stream));
  REQUIRE_OK(SATRAP_CUDA_CHECK(cudaStreamSynchronize(stream)));
  check_close("in place", to_host(d, n), h, 0.0, 0.0);
  check_close("out of place", to_host(out, n), h, 0.0, 0.0);

  // The trainer's flow: all-reduce the GPU DLRM's gradients on the device, on the model's stream.
  dense_model_config config;
  config.slots = 3;
  auto model = make_cuda_dlrm(config, 5);
  REQUIRE_OK(model);
  cuda_dlrm& m = *model.value();
  const int batch = 16;
  auto dense = random_floats(size_t(batch) * config.dense_features, 121);
  auto pooled = random_floats(size_t(batch) * config.slots * config.dim, 122);
  std::vector<float> labels(batch, 1.0f), logits(batch), pooled_grad(pooled.size());
  REQUIRE_OK(m.try_forward_backward(batch, dense.data(), pooled.data(), labels.data(), 1.0f,
                                    logits.data(), pooled_grad.data()));
  float* dg = m.device_grads();
  REQUIRE(dg != nullptr);
  REQUIRE_OK(comm.value()->all_reduce_sum(dg, dg, m.param_count(), m.stream()));
  REQUIRE_OK(SATRAP_CUDA_CHECK(cudaStreamSynchronize(m.stream())));
  auto reduced = m.grads();  // downloads: device_grads() marked the device copy newer
  std::vector<float> cl(batch), cpg(pooled.size());
  auto cpu = make_dlrm(config, 5);
  cpu->forward_backward(batch, dense.data(), pooled.data(), labels.data(), 1.0f, cl.data(),
                        cpg.data());
  check_rel_l2("all-reduced grads (one rank)", std::vector<float>(reduced.begin(), reduced.end()),
               std::vector<float>(cpu->grads().begin(), cpu->grads().end()), 1e-5);
  REQUIRE_OK(comm.value()->destroy());
  CHECK_FALSE(comm.value()->all_reduce_sum(d.data(), d.data(), n, stream).ok());
  REQUIRE_OK(SATRAP_CUDA_CHECK(cudaStreamDestroy(stream)));
}

TEST_CASE("NCCL all-reduce across every GPU, one rank (and thread) per device") {
  auto devices = cuda_device_count();
  REQUIRE_OK(devices);
  const int n = devices.value();
  if (n < 2) {
    MESSAGE("one GPU: the multi-rank all-reduce needs two or more (the one-rank case ran above)");
    return;
  }
  auto id = nccl_comm::make_unique_id();
  REQUIRE_OK(id);
  const size_t count = 1 << 20;
  std::vector<std::string> errors(n);
  std::vector<float> first(n), last(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto fail = [&](const std::string& e) { errors[r] = e; };
      auto comm = nccl_comm::init_rank(id.value(), n, r, r);
      if (!comm.ok()) return fail(comm.error());
      cudaStream_t stream = nullptr;
      if (auto s = SATRAP_CUDA_CHECK(cudaStreamCreate(&stream)); !s.ok()) return fail(s.error());
      device_array<float> buf;
      if (auto s = buf.reserve(count); !s.ok()) return fail(s.error());
      std::vector<float> h(count, static_cast<float>(r + 1));
      cudaMemcpy(buf.data(), h.data(), count * sizeof(float), cudaMemcpyHostToDevice);
      if (auto s = comm.value()->all_reduce_sum(buf.data(), buf.data(), count, stream); !s.ok())
        return fail(s.error());
      if (auto s = SATRAP_CUDA_CHECK(cudaStreamSynchronize(stream)); !s.ok()) return fail(s.error());
      cudaMemcpy(h.data(), buf.data(), count * sizeof(float), cudaMemcpyDeviceToHost);
      first[r] = h.front();
      last[r] = h.back();
      cudaStreamDestroy(stream);
      if (auto s = comm.value()->destroy(); !s.ok()) return fail(s.error());
    });
  for (auto& t : threads) t.join();
  const float expected = static_cast<float>(n * (n + 1) / 2);
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK(errors[r].empty());
    CHECK(first[r] == expected);
    CHECK(last[r] == expected);
  }
}

// Without a device: the host suite, then exit 77 (CTest's SKIP_RETURN_CODE) saying why.
int main(int argc, char** argv) {
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  auto devices = cuda_device_count();
  if (!devices.ok()) {
    context.addFilter("test-suite", "host");
    int rc = context.run();
    if (rc != 0 || context.shouldExit()) return rc;
    std::printf("SKIPPED: %s; the GPU cases of satrap_gpu_test need a CUDA device\n",
                devices.error().c_str());
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    std::printf("satrap_gpu_test on %s (sm_%d%d), %d device(s), NCCL %d\n", prop.name, prop.major,
                prop.minor, devices.value(), nccl_comm::version());
  return context.run();
}
