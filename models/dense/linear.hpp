// A fully connected layer, batch-major, via cblas_sgemm: y = x W^T + b (W is out x in, row-major).
// Threading: free functions on caller-owned memory.
#pragma once

namespace satrap {

// y[batch x out] = x[batch x in] * W^T + b.
void linear_forward(int batch, int in, int out, const float* x, const float* w, const float* b,
                    float* y);

// The same followed by a ReLU when relu: the GEMM (beta 0), then the bias and the ReLU in one pass.
// wt: scratch of in x out floats, or null; with it, a narrow layer (in x out <= 15,625) goes
// through W^T, in blocks of rows, to OpenBLAS's faster small-matrix kernel (linear.cpp).
void linear_forward_relu(int batch, int in, int out, const float* x, const float* w, const float* b,
                         bool relu, float* y, float* wt = nullptr);

// The GEMMs of a layer (out > 1) as the functions here make them (dense_roofline times them):
// y = x W^T (beta 0; with wt = W^T written out by the caller for a narrow layer, else null),
// dw = dy^T x and dx = dy W. Narrow layers (in x out <= 15,625) go in blocks of rows (of the
// batch, for dw) to OpenBLAS's small-matrix kernel, 1.3-1.5x its packed path at these sizes.
void linear_gemm_y(int batch, int in, int out, const float* x, const float* w, const float* wt,
                   float* y);
void linear_gemm_dw(int batch, int in, int out, const float* x, const float* dy, float* dw);
void linear_gemm_dx(int batch, int in, int out, const float* dy, const float* w, float* dx);

// dw[out x in] and db[out] are overwritten; dx[batch x in] too, unless null.
void linear_backward(int batch, int in, int out, const float* x, const float* w, const float* dy,
                     float* dx, float* dw, float* db);

// The pieces of linear_backward, for an MLP that fuses them with its activations' passes:
// db[out] = the column sums of dy[batch x out] (rows in order).
void linear_bias_grad(int batch, int out, const float* dy, float* db);
// dw (and dx unless null) as linear_backward, no db.
void linear_backward_weights(int batch, int in, int out, const float* x, const float* w,
                             const float* dy, float* dx, float* dw);
// The backward of a layer whose input x is a ReLU's output (as it was, after any dropout): dw as
// linear_backward, dx = scale * (x > 0 ? dy W : 0) (the gradient at the ReLU's input, scale the
// dropout's 1/(1-p) or 1), and dbx[in] = the column sums of that dx (the bias gradient of the layer
// before the ReLU), in one pass over dx. The same numbers as linear_backward, relu_backward, the
// scaling and linear_bias_grad one after the other.
void linear_backward_relu_input(int batch, int in, int out, const float* x, const float* w,
                                const float* dy, float scale, float* dx, float* dw, float* dbx);

}  // namespace satrap
