// Thread-to-env indexing and row stores.
//
// One thread per env (the step kernel: per GV_ENVS_PER_THREAD envs, autoreset.cuh),
// grid-stride, so any num_envs runs with any grid. Per-env data is
// structure-of-arrays (one (n,) tensor per field): thread i reads field[i] while its warp
// neighbours read field[i+1..], which coalesces into full 128-byte transactions.
// Observations are (n, obs_dim) row-major; gv_store_row writes a row with the widest
// aligned vector stores its width allows, so a warp writes one contiguous span.
#pragma once

#include "rng.cuh"

#ifdef __CUDACC__
#define GV_FOR_EACH_ENV(i, num_envs)                                           \
  for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < (num_envs); \
       i += (int)(blockDim.x * gridDim.x))
#endif

// Row `i` of a row-major (n, kDim) float32 array (the base is 256-byte aligned by torch).
template <int kDim>
GV_HD void gv_store_row(float* base, int i, const float (&row)[kDim]) {
  float* dst = base + (long long)i * kDim;
  if constexpr (kDim % 4 == 0) {
#pragma unroll
    for (int k = 0; k < kDim; k += 4) {
      *reinterpret_cast<float4*>(dst + k) = make_float4(row[k], row[k + 1], row[k + 2], row[k + 3]);
    }
  } else if constexpr (kDim % 2 == 0) {
#pragma unroll
    for (int k = 0; k < kDim; k += 2) {
      *reinterpret_cast<float2*>(dst + k) = make_float2(row[k], row[k + 1]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kDim; ++k) dst[k] = row[k];
  }
}
