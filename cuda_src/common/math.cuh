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

// sinf(x) and cosf(x), bit for bit, with the reduction of |x| >= 105615 out of line.
// The library inlines that reduction (Payne-Hanek: a table walk over seven words) at every
// call, and, though almost never taken, it holds registers across the whole kernel:
// Pendulum's step used 46 of them (five blocks of 256 threads an SM). The common path
// below is libdevice's (__nv_sinf and __nv_cosf, non-ftz: the quadrant from
// rint(x * 2/pi), a three-part Cody-Waite reduction, then the sine or cosine polynomial);
// everything else (|x| >= 105615, +-inf) calls the library's function itself. NaN takes
// the common path, as in the library, and stays NaN. tests/gpu/test_trig.py compares both
// functions with the library's on all 2^32 inputs.
#ifdef __CUDA_ARCH__
__device__ __noinline__ float gv_sinf_far(float x) { return sinf(x); }
__device__ __noinline__ float gv_cosf_far(float x) { return cosf(x); }

// The polynomial of quadrant q (odd: the cosine's, even: the sine's) at the reduced t.
__device__ __forceinline__ float gv_trig_polynomial(int q, float t) {
  const bool odd = (q & 1) != 0;
  const float t2 = __fmul_rn(t, t);
  const float p = odd ? 1.0f : t;
  const float s = __fmaf_rn(t2, p, 0.0f);
  float c = odd ? __fmaf_rn(0x1.9758p-16f, t2, -0x1.6c0fdap-10f) : -0x1.9a82a6p-13f;
  c = __fmaf_rn(c, t2, odd ? 0x1.555576p-5f : 0x1.110bc8p-7f);
  c = __fmaf_rn(c, t2, odd ? -0x1.fffffep-2f : -0x1.55555p-3f);
  const float r = __fmaf_rn(c, s, p);
  return (q & 2) != 0 ? __fmaf_rn(r, -1.0f, 0.0f) : r;
}

// x - q * pi/2 in three parts, q = rint(x * 2/pi): the library's reduction for |x| < 105615.
__device__ __forceinline__ float gv_trig_reduce(float x, int* q) {
  *q = __float2int_rn(__fmul_rn(x, 0x1.45f306p-1f));
  const float j = (float)*q;
  float t = __fmaf_rn(j, -0x1.921fb4p+0f, x);
  t = __fmaf_rn(j, -0x1.4442d0p-24f, t);
  return __fmaf_rn(j, -0x1.84698ap-48f, t);
}
#endif

// sinf(x) (kCosine false) or cosf(x) (true): the cosine is the sine a quadrant on.
template <bool kCosine>
GV_HD float gv_sin_or_cos(float x) {
#ifdef __CUDA_ARCH__
  if (fabsf(x) >= 105615.0f) return kCosine ? gv_cosf_far(x) : gv_sinf_far(x);
  int q;
  const float t = gv_trig_reduce(x, &q);
  return gv_trig_polynomial(kCosine ? q + 1 : q, t);
#else
  return kCosine ? cosf(x) : sinf(x);
#endif
}

GV_HD float gv_sinf(float x) { return gv_sin_or_cos<false>(x); }
GV_HD float gv_cosf(float x) { return gv_sin_or_cos<true>(x); }
