// Host emulation of the CUDA features tag.cu uses (for compare.sh): one std::thread per
// CUDA thread, std::barrier for __syncthreads, warp votes and shuffles through a per-warp
// barrier; the blocks of a launch run one after another.
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
#define __device__
#define __host__
#define __global__
#define __shared__
#define __forceinline__ inline
#define __launch_bounds__(...)
struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct float4 { float x, y, z, w; };
struct float2 { float x, y; };
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float2 make_float2(float a, float b) { return {a, b}; }
inline int min(int a, int b) { return a < b ? a : b; }
// CUDA's __byte_perm: byte i of the result is byte (s >> 4 * i) & 7 of the pair (x, y), x's
// bytes first (the sign-replicating mode, selector bit 3, is not emulated).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long pair = ((unsigned long long)y << 32) | x;
  unsigned out = 0;
  for (int i = 0; i < 4; ++i) out |= (unsigned)((pair >> (8 * ((s >> (4 * i)) & 7))) & 0xffu) << (8 * i);
  return out;
}
inline thread_local dim3 threadIdx;
inline dim3 blockIdx, blockDim;
inline unsigned emu_smem_bytes;
alignas(16) inline float4 tag_dynamic_shared[32768];
inline std::barrier<>* emu_block_barrier;
inline std::atomic<int> emu_or;
inline void __syncthreads() { emu_block_barrier->arrive_and_wait(); }
inline int __syncthreads_or(int p) {
  if (p) emu_or.fetch_or(1);
  __syncthreads();
  int r = emu_or.load();
  __syncthreads();
  if (threadIdx.x == 0) emu_or.store(0);
  __syncthreads();
  return r;
}
struct EmuWarp { std::barrier<> bar{32}; uint32_t vals[32]; };
inline std::vector<EmuWarp*> emu_warps;
inline uint32_t emu_exchange(uint32_t v, int src) {
  EmuWarp* w = emu_warps[threadIdx.x / 32];
  w->vals[threadIdx.x % 32] = v;
  w->bar.arrive_and_wait();
  uint32_t r = w->vals[src & 31];
  w->bar.arrive_and_wait();
  return r;
}
inline float __shfl_sync(unsigned, float v, int src) {
  uint32_t u; std::memcpy(&u, &v, 4); u = emu_exchange(u, src); std::memcpy(&v, &u, 4); return v;
}
inline int __any_sync(unsigned, int p) {
  EmuWarp* w = emu_warps[threadIdx.x / 32];
  w->vals[threadIdx.x % 32] = p != 0;
  w->bar.arrive_and_wait();
  int r = 0;
  for (int k = 0; k < 32; ++k) r |= w->vals[k];
  w->bar.arrive_and_wait();
  return r;
}
inline unsigned __ballot_sync(unsigned, int p) {
  EmuWarp* w = emu_warps[threadIdx.x / 32];
  w->vals[threadIdx.x % 32] = p != 0;
  w->bar.arrive_and_wait();
  unsigned r = 0;
  for (int k = 0; k < 32; ++k) r |= w->vals[k] << k;
  w->bar.arrive_and_wait();
  return r;
}
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
// Round-to-nearest float arithmetic (the harness is built with -ffp-contract=off).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
