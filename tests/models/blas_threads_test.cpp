#include <doctest/doctest.h>

#include "models/dense/blas_threads.hpp"

#include <cblas.h>

#include <vector>

using namespace satrap;

TEST_CASE("blas threads: auto gives the cores to a big dense network only, and one lease only") {
  dense_model_config small;  // the zoo's default DLRM: a few thousand parameters
  dense_model_config kaggle;
  kaggle.slots = 26;
  kaggle.bottom = {512, 256, 64};
  kaggle.top = {512, 256};
  REQUIRE(dense_model_param_count(small) < blas_threads_auto_params);
  REQUIRE(dense_model_param_count(kaggle) >= blas_threads_auto_params);
  CHECK(auto_blas_threads(small, 2) == 1);
  CHECK(auto_blas_threads(kaggle, 1) == 1);
  CHECK(auto_blas_threads(kaggle, 2) == 2);
  CHECK(auto_blas_threads(kaggle, 64) == 8);

  {
    blas_threads_lease one;
    CHECK(blas_threads_apply(2) == 2);
    {
      blas_threads_lease two;  // a second trainer in the process: one thread each
      CHECK(blas_threads_apply(2) == 1);
    }
    CHECK(blas_threads_apply(2) == 2);
    CHECK(blas_threads_apply(0) == 1);
  }
  CHECK(blas_threads_apply(4) == 1);  // no lease: not a trainer's setting
}

TEST_CASE("blas threads: after quiesce, multi-threaded GEMMs start OpenBLAS's threads again") {
  // 384 x 384 is above OpenBLAS's threshold for splitting a GEMM over threads.
  const int n = 384;
  std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size()), want(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % 7) - 3.0f;
    b[i] = static_cast<float>(i % 5) * 0.25f;
  }
  auto gemm = [&](std::vector<float>& out) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, out.data(), n);
  };
  blas_threads_lease one;
  REQUIRE(blas_threads_apply(1) == 1);
  gemm(want);
  blas_threads_quiesce();
  blas_threads_quiesce();  // twice: the second finds nothing to stop
  REQUIRE(blas_threads_apply(2) == 2);
  gemm(c);
  CHECK(c == want);  // integers and quarters: exact in any summation order
  blas_threads_quiesce();
  gemm(c);
  CHECK(c == want);
  CHECK(blas_threads_apply(1) == 1);
}
