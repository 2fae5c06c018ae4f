#include <doctest/doctest.h>

#include "actors/node_agent/role_configs.hpp"
#include "spec/job_spec.hpp"

using namespace satrap;

TEST_CASE(
  "a trainer's BLAS threads: auto by the dense network and the process's cores, or as set") {
  auto spec = job_spec_defaults();  // the default job: a linear top, ~1k dense parameters
  CHECK(trainer_config(spec, 0, {}, {}, {}, 2).blas_threads == 1);
  spec.model.network.slots = 26;  // the Kaggle DLRM shape of train_vs_torch.sh
  spec.model.network.bottom = {512, 256, 64};
  spec.model.network.top = {512, 256};
  CHECK(trainer_config(spec, 0, {}, {}, {}, 2).blas_threads == 2);
  CHECK(trainer_config(spec, 0, {}, {}, {}, 1).blas_threads == 1);
  spec.training.blas_threads = 3;
  CHECK(trainer_config(spec, 0, {}, {}, {}, 2).blas_threads == 3);
}
