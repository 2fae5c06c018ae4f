// Every CUDA kernel (models/cuda/cuda_kernels.hpp) against its CPU twin on random deterministic
// inputs, under a per-kernel tolerance.
#include <cblas.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "models/cuda/cuda_kernels.hpp"
#include "models/dense/bce.hpp"
#include "models/dense/concat.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/interaction.hpp"
#include "models/dense/linear.hpp"
#include "models/dense/relu.hpp"
#include "models/embedding/pooling.hpp"
#include "models/embedding/sparse_kernels.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace satrap;
using namespace satrap::gpu_test;

// ---- kernels against their CPU twins ------------------------------------------------------------

TEST_CASE("bias + ReLU forward matches linear_forward's bias then relu_forward") {
  const int batch = 77, out = 45;
  auto y0 = random_floats(size_t{batch} * out, 1);
  auto b = random_floats(out, 2);
  for (bool relu : {false, true}) {
    std::vector<float> cpu = y0;
    for (int i = 0; i < batch; ++i)
      for (int o = 0; o < out; ++o)
        cpu[size_t(i) * out + o] += b[o];
    if (relu)
      relu_forward(cpu.size(), cpu.data(), cpu.data());
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
      if (relu)
        relu_backward(cpu_dy.size(), y.data(), cpu_dy.data(), cpu_dy.data());
      for (int i = 0; i < batch; ++i)
        for (int o = 0; o < out; ++o)
          cpu_db[o] += cpu_dy[size_t(i) * out + o];
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
      REQUIRE_OK(cuda_gemm(blas.value(), ta, tb, m, n, k, 0.5f, da.data(), lda, db.data(), ldb,
                           2.0f, dc.data(), ldc));
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
    if (relu)
      relu_forward(y.size(), y.data(), y.data());
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
  struct shape {
    int batch, slots, dim;
  };
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
    for (int k = 0; k < len; ++k)
      inverse.push_back(rng() % n_unique);
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
    check_close("pool_backward", to_host(dgu, gu.size()), gu, 1e-5, 1e-5);    // atomics
  }
}

TEST_CASE("BCE with logits matches bce_with_logits") {
  const int batch = 3001;
  auto logits = random_floats(batch, 70, -30.0f, 30.0f);
  logits[0] = 0.0f;
  logits[1] = 80.0f;
  logits[2] = -80.0f;
  auto labels = random_floats(batch, 71, 0.0f, 1.0f);
  for (float& y : labels)
    y = y < 0.5f ? 0.0f : 1.0f;
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
      REQUIRE_OK(
        cuda_dense_optimizer_step(nullptr, o, step, n, dw.data(), dg.data(), dm.data(), dv.data()));
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
  for (int r = 0; r < rows; ++r)
    ids.push_back(static_cast<uint32_t>((r * 37 + 5) % table_rows));
  auto dw = to_device(w), dacc = to_device(acc), dg = to_device(g);
  auto dids = to_device(ids);
  for (int r = 0; r < rows; ++r)
    sparse_kernels_scalar().step(p, w.data() + size_t(ids[r]) * dim,
                                 acc.data() + size_t(ids[r]) * dim, g.data() + size_t(r) * dim);
  REQUIRE_OK(cuda_sparse_adagrad_step(nullptr, rows, dim, dids.data(), p.lr, p.eps, p.weight_decay,
                                      p.clip, dw.data(), dacc.data(), dg.data()));
  check_close("weights", to_host(dw, w.size()), w, 1e-6, 1e-5);
  check_close("accumulators", to_host(dacc, acc.size()), acc, 1e-6, 1e-5);
}

TEST_CASE("bf16 / fp16 rounding is round-to-nearest-even") {
  // Host reference: bf16 keeps the top 16 bits after adding 0x7fff + the kept lowest bit.
  auto bf16 = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  };
  std::vector<float> x = random_floats(4099, 300, -1000.0f, 1000.0f);
  x[0] = 0.0f;
  x[1] = 1.0f + 1.0f / 256.0f;  // a tie in bf16: rounds to even (1.0)
  x[2] = -3.0e38f;
  auto dx = to_device(x);
  device_array<uint16_t> d16;
  REQUIRE_OK(d16.reserve(x.size()));
  REQUIRE_OK(cuda_round_to_half(nullptr, dense_precision::bf16, x.size(), dx.data(), d16.data()));
  auto got = to_host(d16, x.size());
  size_t wrong = 0;
  for (size_t i = 0; i < x.size(); ++i)
    wrong += got[i] != bf16(x[i]);
  CHECK(wrong == 0);
  CHECK(got[1] == 0x3f80);
  REQUIRE_OK(cuda_round_to_half(nullptr, dense_precision::fp16, 3, dx.data(), d16.data()));
  auto h = to_host(d16, 3);
  CHECK(h[0] == 0x0000);
  CHECK(h[1] == 0x3c04);  // 1 + 2^-8 is exact in fp16 (ulp 2^-10): 0x3c00 + 4
  CHECK(h[2] == 0xfc00);  // -3e38 overflows to -Inf
  CHECK_FALSE(cuda_round_to_half(nullptr, dense_precision::fp32, 3, dx.data(), d16.data()).ok());
}
