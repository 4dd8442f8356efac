// Thread-to-env indexing, row stores and block loads and stores.
//
// One thread per env (the step kernel: per GV_ENVS_PER_THREAD envs, single_agent_kernels.cuh),
// grid-stride, so any num_envs runs with any grid. Per-env data is
// structure-of-arrays (one (n,) tensor per field): thread i reads field[i] while its warp
// neighbours read field[i+1..], which coalesces into full 128-byte transactions.
// Observations are (n, obs_dim) row-major; gv_store_row writes a row with the widest
// aligned vector stores its width allows, so a warp writes one contiguous span.
// gv_load_block / gv_store_block move N consecutive values of one array (a thread's
// envs, GV_ENVS_PER_THREAD of them) with the widest accesses their size allows.
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

// The widest access (16, 8, 4, 2 or 1 bytes) that divides a block of kBytes.
template <int kBytes>
struct GvBlockWidth {
  static constexpr int value = kBytes % 16 == 0 ? 16 : kBytes % 8 == 0 ? 8
                               : kBytes % 4 == 0 ? 4 : kBytes % 2 == 0 ? 2 : 1;
};

// Whether `p` may start blocks of N values of T: aligned to the block's access width.
template <class T, int N>
GV_HD bool gv_block_aligned(const void* p) {
  return ((unsigned long long)p) % GvBlockWidth<N * (int)sizeof(T)>::value == 0;
}

// The access word of a block of kBytes: 16, 8, 4, 2 or 1 bytes (GvBlockWidth).
template <int kWidth> struct GvWord;
template <> struct GvWord<16> { typedef uint4 type; };
template <> struct GvWord<8> { typedef uint2 type; };
template <> struct GvWord<4> { typedef unsigned int type; };
template <> struct GvWord<2> { typedef unsigned short type; };
template <> struct GvWord<1> { typedef unsigned char type; };

// N values of T seen as access words (a union: NVRTC has no memcpy; the words stay in
// registers, so the bits move unchanged and the typed values cost at most a byte shuffle).
template <class T, int N>
union GvBlock {
  static constexpr int kBytes = N * (int)sizeof(T);
  typedef typename GvWord<GvBlockWidth<kBytes>::value>::type Word;
  static constexpr int kWords = kBytes / (int)sizeof(Word);
  T value[N];
  Word word[kWords];
};

// N consecutive values of T at src, read with the widest accesses their size allows (src
// aligned as gv_block_aligned says): one 32-bit load fetches four bool flags, one 128-bit
// load four floats.
template <class T, int N>
GV_HD void gv_load_block(const T* src, T (&dst)[N]) {
  typedef GvBlock<T, N> Block;
  Block block;
#pragma unroll
  for (int j = 0; j < Block::kWords; ++j) {
    block.word[j] = reinterpret_cast<const typename Block::Word*>(src)[j];
  }
#pragma unroll
  for (int j = 0; j < N; ++j) dst[j] = block.value[j];
}

// The store of gv_load_block.
template <class T, int N>
GV_HD void gv_store_block(T* dst, const T (&src)[N]) {
  typedef GvBlock<T, N> Block;
  Block block;
#pragma unroll
  for (int j = 0; j < N; ++j) block.value[j] = src[j];
#pragma unroll
  for (int j = 0; j < Block::kWords; ++j) {
    reinterpret_cast<typename Block::Word*>(dst)[j] = block.word[j];
  }
}

// gv_load_block where `whole`, else the N values one by one (the same values).
template <class T, int N>
GV_HD void gv_load_values(const T* src, T (&dst)[N], bool whole) {
  if (whole) {
    gv_load_block<T, N>(src, dst);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) dst[j] = src[j];
  }
}

// gv_store_block where `whole`, else the N values one by one.
template <class T, int N>
GV_HD void gv_store_values(T* dst, const T (&src)[N], bool whole) {
  if (whole) {
    gv_store_block<T, N>(dst, src);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) dst[j] = src[j];
  }
}
