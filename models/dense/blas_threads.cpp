#include "models/dense/blas_threads.hpp"

#include <algorithm>
#include <atomic>

extern "C" void openblas_set_num_threads(int);
// OpenBLAS's pthread build; weak, so a build without it (serial) links and skips the call.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

namespace satrap {

namespace {
std::atomic<int> leases{0};
std::atomic<int> current{0};  // the count last set; 0: never set here
}  // namespace

int auto_blas_threads(const dense_model_config& model, int cores) {
  if (cores <= 1 || dense_model_param_count(model) < blas_threads_auto_params)
    return 1;
  return std::min(cores, 8);  // OpenBLAS's sgemm gains little past a few threads at these sizes
}

blas_threads_lease::blas_threads_lease() { leases.fetch_add(1); }
blas_threads_lease::~blas_threads_lease() { leases.fetch_sub(1); }

int blas_threads_granted(int want) { return leases.load() == 1 ? std::max(want, 1) : 1; }

void blas_threads_quiesce() {
  if (blas_thread_shutdown_ != nullptr)
    blas_thread_shutdown_();
}

int blas_threads_apply(int want) {
  int n = blas_threads_granted(want);
  if (current.exchange(n) != n)
    openblas_set_num_threads(n);
  return n;
}

}  // namespace satrap
