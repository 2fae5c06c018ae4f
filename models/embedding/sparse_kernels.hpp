// The per-row kernels of the embedding store: one sparse optimizer step on a row, and fp16
// conversions. One declaration, two implementations: sparse_kernels_cpu.cpp (plain loops, the
// specification) and sparse_kernels_avx2.cpp (AVX2 + F16C through target attributes, so the binary
// runs on any x86-64 and picks AVX2 at run time with __builtin_cpu_supports). The AVX2 version
// uses no FMA and reduces in the scalar version's lane order, so both give the same bits.
// Threading: pure functions over the caller's memory.
#pragma once

#include <cstdint>

#include "models/embedding/embedding_options.hpp"

namespace satrap {

// The optimizer settings a step needs, taken from embedding_options once.
struct step_params {
  sparse_optimizer_kind kind = sparse_optimizer_kind::sgd;  // which formula
  int dim = 0;                                              // weights per row
  float lr = 0.0f;                                          // learning rate (FTRL alpha)
  float eps = 0.0f;                                         // denominator guard
  float beta1 = 0.9f;                                       // Adam
  float beta2 = 0.999f;                                     // Adam
  float ftrl_beta = 1.0f;                                   // FTRL
  float ftrl_l1 = 0.0f;                                     // FTRL
  float ftrl_l2 = 0.0f;                                     // FTRL
  float weight_decay = 0.0f;                                // g += weight_decay * w
  float clip = 0.0f;                                        // > 0: w clamped to [-clip, clip]

  static step_params of(const embedding_options& o);
};

// One step on fp32 weights `w` (dim) and state (optimizer_state_floats) with gradient `g` (dim).
using step_fn = void (*)(const step_params& p, float* w, float* state, const float* g);
using f16_to_f32_fn = void (*)(const uint16_t* in, float* out, int n);
using f32_to_f16_fn = void (*)(const float* in, uint16_t* out, int n);

struct sparse_kernels {
  const char* name = "";  // "scalar" or "avx2"
  step_fn step = nullptr;
  f16_to_f32_fn to_f32 = nullptr;
  f32_to_f16_fn to_f16 = nullptr;
};

const sparse_kernels& sparse_kernels_scalar();
// nullptr when the CPU lacks AVX2 or F16C.
const sparse_kernels* sparse_kernels_avx2();
// AVX2 when allowed and present, else scalar.
const sparse_kernels& sparse_kernels_select(simd_choice choice);

// Shared by both implementations: the fixed summation order of 8 lanes.
inline float lanes8_sum(const float* l) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

// Shared: FTRL-Proximal per coordinate (McMahan et al. 2013), scalar in both versions.
void ftrl_step_scalar(const step_params& p, float* w, float* state, const float* g);

}  // namespace satrap
