// A fully connected layer, batch-major, via cblas_sgemm: y = x W^T + b (W is out x in, row-major).
// Threading: free functions on caller-owned memory.
#pragma once

namespace satrap {

// y[batch x out] = x[batch x in] * W^T + b.
void linear_forward(int batch, int in, int out, const float* x, const float* w, const float* b,
                    float* y);

// dw[out x in] and db[out] are overwritten; dx[batch x in] too, unless null.
void linear_backward(int batch, int in, int out, const float* x, const float* w, const float* dy,
                     float* dx, float* dw, float* db);

}  // namespace satrap
