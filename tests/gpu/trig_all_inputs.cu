// gv_sinf and gv_cosf (cuda_src/common/math.cuh) against the library's sinf and cosf on
// every float32 bit pattern: tests/gpu/test_trig.py.
#include "common/math.cuh"

// -DGV_TRIG_REFERENCE_OFF_BY_ONE flips the lowest bit of the library's results: every input
// must then count (the test that the comparison can fail).
#ifdef GV_TRIG_REFERENCE_OFF_BY_ONE
#define GV_REFERENCE(v) (__float_as_uint(v) ^ 1u)
#else
#define GV_REFERENCE(v) __float_as_uint(v)
#endif

// Counts the inputs where gv_sinf(x) and sinf(x) (counts[0]), gv_cosf(x) and cosf(x)
// (counts[1]) differ in any bit, and keeps the smallest such bit pattern of each in
// first[0], first[1] (0xffffffff: none). Inputs: the bit patterns [start, start + count).
extern "C" __global__ void trig_mismatches(unsigned long long* counts, unsigned int* first,
                                           unsigned long long start, unsigned long long count) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long k = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
       k < count; k += stride) {
    const unsigned int bits = (unsigned int)(start + k);
    const float x = __uint_as_float(bits);
    if (__float_as_uint(gv_sinf(x)) != GV_REFERENCE(sinf(x))) {
      atomicAdd(&counts[0], 1ull);
      atomicMin(&first[0], bits);
    }
    if (__float_as_uint(gv_cosf(x)) != GV_REFERENCE(cosf(x))) {
      atomicAdd(&counts[1], 1ull);
      atomicMin(&first[1], bits);
    }
  }
}
