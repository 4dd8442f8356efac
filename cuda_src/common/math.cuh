// Elementwise helpers with torch's exact semantics, for kernels that mirror a torch reference.
#pragma once

// NVRTC declares the math functions itself and has no <math.h> (nor its INFINITY).
#ifdef __CUDACC_RTC__
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#else
#include <math.h>
#endif

#include "rng.cuh"

// torch.clamp(x, low, high) for float32: NaN stays NaN.
GV_HD float gv_clamp(float x, float low, float high) {
  return x < low ? low : (x > high ? high : x);
}

// torch.remainder(a, b) for float32 (at::native remainder): fmod, then the divisor's sign.
GV_HD float gv_remainder(float a, float b) {
  float mod = fmodf(a, b);
  if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) mod += b;
  return mod;
}

// a / b for b > 0 (or +inf), bit for bit: a zero numerator returns itself (0 / b keeps a's
// sign) instead of entering the division's slow path, which a zero takes (FCHK flags it) at
// about 30 instructions of branches, where the normal path is 8. A kernel's normalising
// divisions see many zeros (speeds and accelerations at rest, a fresh game's time).
GV_HD float gv_div_positive(float a, float b) {
  const float numerator = a == 0.0f ? 1.0f : a;
  const float quotient = numerator / b;
  return a == 0.0f ? a : quotient;
}
