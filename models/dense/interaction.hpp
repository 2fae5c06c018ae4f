// DLRM dot interaction: per sample, vectors [x, e_1..e_slots] (n = slots+1 of size dim);
// out = [x, dots(i<j)] of size dim + n(n-1)/2, dots ordered (0,1),(0,2)..(0,n-1),(1,2)...
// Threading: free functions on caller-owned memory.
#pragma once

namespace satrap {

int interaction_output_size(int slots, int dim);

// x: batch x dim; emb: batch x slots x dim; out: batch x interaction_output_size.
void interaction_forward(int batch, int slots, int dim, const float* x, const float* emb,
                         float* out);

// dx (batch x dim) and demb (batch x slots x dim) are overwritten.
void interaction_backward(int batch, int slots, int dim, const float* x, const float* emb,
                          const float* dout, float* dx, float* demb);

}  // namespace satrap
