#include <doctest/doctest.h>

#include "models/dense/blas_threads.hpp"

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
