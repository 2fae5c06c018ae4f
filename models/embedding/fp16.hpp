// Scalar IEEE half <-> float conversions, round to nearest even (the same results as F16C's
// vcvtps2ph with _MM_FROUND_TO_NEAREST_INT, so the scalar and AVX2 kernels agree bit for bit on
// finite values). After F. Giesen's public-domain float_to_half_fast3_rtne / half_to_float.
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <cstring>

namespace satrap {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  constexpr uint32_t f32_infinity = 255u << 23, f16_limit = (127u + 16u) << 23;
  constexpr uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t u = f32_bits(f);
  uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t out;
  if (u >= f16_limit) {
    out = u > f32_infinity ? 0x7e00u : 0x7c00u;  // NaN stays NaN, the rest overflows to inf
  } else if (u < (113u << 23)) {                 // half subnormal or zero: let the FPU round
    out = f32_bits(f32_from_bits(u) + f32_from_bits(denorm_magic)) - denorm_magic;
  } else {
    uint32_t odd = (u >> 13) & 1u;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd;
    out = u >> 13;
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

inline float f16_to_f32(uint16_t h) {
  constexpr uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t out = (h & 0x7fffu) << 13;
  uint32_t exp = shifted_exp & out;
  out += (127u - 15u) << 23;
  if (exp == shifted_exp) {
    out += (128u - 16u) << 23;  // inf / NaN
  } else if (exp == 0) {        // zero / subnormal: renormalise through the FPU
    out += 1u << 23;
    out = f32_bits(f32_from_bits(out) - f32_from_bits(113u << 23));
  }
  return f32_from_bits(out | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

}  // namespace satrap
