// Counter-based random numbers: Philox-4x32-10, bit-identical to gpu_vecenv/seeding.py.
//
// A draw is a pure function of (seed, index, counter, block, stream):
//   key     = (seed & 0xffffffff, seed >> 32)          (the 64-bit seed, two's complement)
//   counter = (counter, index, block, stream)           (each truncated to 32 bits)
// Words 4*block .. 4*block+3 of a draw come from one Philox call. A word becomes a float32
// uniform in [0, 1) as (word >> 8) * 2^-24 (exact), and [low, high) as u * (high - low) + low
// in float32 with the span rounded first, as seeding.uniform does.
//
// Everything is __host__ __device__ so that tests/host_kernels/ can check it on a machine without a GPU.
#pragma once

#include "stdint.cuh"

#define GV_HD __host__ __device__ __forceinline__

#define GV_PHILOX_M0 0xD2511F53u
#define GV_PHILOX_M1 0xCD9E8D57u
#define GV_PHILOX_W0 0x9E3779B9u
#define GV_PHILOX_W1 0xBB67AE85u

#define GV_STREAM_RESET 0u    // initial states
#define GV_STREAM_ACTIONS 1u  // sample_actions.cu: random actions

struct GvWords4 {
  uint32_t w[4];
};

GV_HD uint32_t gv_mulhi32(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return (uint32_t)(((uint64_t)a * (uint64_t)b) >> 32);
#endif
}

// Philox-4x32 with 10 rounds (Salmon et al., SC'11; Random123's philox4x32).
GV_HD GvWords4 gv_philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                uint32_t k0, uint32_t k1) {
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += GV_PHILOX_W0;
      k1 += GV_PHILOX_W1;
    }
    const uint32_t hi0 = gv_mulhi32(GV_PHILOX_M0, c0);
    const uint32_t lo0 = GV_PHILOX_M0 * c0;
    const uint32_t hi1 = gv_mulhi32(GV_PHILOX_M1, c2);
    const uint32_t lo1 = GV_PHILOX_M1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0;
    const uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  GvWords4 out;
  out.w[0] = c0;
  out.w[1] = c1;
  out.w[2] = c2;
  out.w[3] = c3;
  return out;
}

// Words 4*block .. 4*block+3 of the draw number `counter` of `index` under `seed`.
GV_HD GvWords4 gv_random_block(long long seed, long long index, long long counter,
                               uint32_t block, uint32_t stream) {
  const uint64_t s = (uint64_t)seed;
  return gv_philox4x32_10((uint32_t)((uint64_t)counter & 0xffffffffu),
                          (uint32_t)((uint64_t)index & 0xffffffffu), block, stream,
                          (uint32_t)(s & 0xffffffffu), (uint32_t)(s >> 32));
}

// A 32-bit word as a float32 uniform in [0, 1): its top 24 bits times 2^-24 (exact).
GV_HD float gv_uniform01(uint32_t word) {
  return (float)(word >> 8) * (1.0f / 16777216.0f);
}

// Fills u[0 .. num-1] with the uniforms of one draw (num <= 4 * max_blocks).
template <int kNum>
GV_HD void gv_random_uniforms(long long seed, long long index, long long counter,
                              uint32_t stream, float (&u)[kNum]) {
#pragma unroll
  for (int block = 0; block < (kNum + 3) / 4; ++block) {
    const GvWords4 words = gv_random_block(seed, index, counter, (uint32_t)block, stream);
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      if (4 * block + lane < kNum) u[4 * block + lane] = gv_uniform01(words.w[lane]);
    }
  }
}

// [low, high) from a [0, 1) uniform, as seeding.uniform: u * span + low, span = high - low,
// each rounded to float32 separately (compile with -fmad=false so this never fuses).
GV_HD float gv_uniform_range(float u, float low, float high) {
  const float span = high - low;
  const float scaled = u * span;
  return scaled + low;
}
