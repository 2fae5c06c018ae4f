#include "models/dense/linear.hpp"

#include <cblas.h>

#include <cstring>

namespace satrap {

void linear_forward(int batch, int in, int out, const float* x, const float* w, const float* b,
                    float* y) {
  for (int i = 0; i < batch; ++i) std::memcpy(y + static_cast<size_t>(i) * out, b, sizeof(float) * out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in, 1.0f,
              y, out);
}

void linear_backward(int batch, int in, int out, const float* x, const float* w, const float* dy,
                     float* dx, float* dw, float* db) {
  // dw = dy^T x
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dy, out, x, in, 0.0f,
              dw, in);
  std::memset(db, 0, sizeof(float) * out);
  for (int i = 0; i < batch; ++i) {
    const float* row = dy + static_cast<size_t>(i) * out;
    for (int o = 0; o < out; ++o) db[o] += row[o];
  }
  // dx = dy W
  if (dx != nullptr)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dy, out, w, in,
                0.0f, dx, in);
}

}  // namespace satrap
