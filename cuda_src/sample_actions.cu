// Random actions drawn on the device: what an env's sample_actions() returns. Bit-identical
// to the torch definition in gpu_vecenv/action_sampling.py.
//
// Slot s of n (an env, or an agent of a game) takes the `dims` components of its action from
// one draw of the env's counter-based RNG (common/rng.cuh):
//   seed    = seeds[s / slots_per_seed]  (the env's seed, or its game's)
//   index   = s
//   counter = counters[s]                (the slot's own count of samples, 32 bits)
//   stream  = GV_STREAM_ACTIONS
// component k being word k of that draw. A component is
//   Discrete / MultiDiscrete: start[k] + (word * count[k]) >> 32, the product in 64 bits
//                             (count[k] <= 2^31, so the bias is below count / 2^32);
//   Box (bounded):           low[k] + (high[k] - low[k]) * u, u = (word >> 8) * 2^-24,
//                             as gv_uniform_range (-fmad=false: nothing fuses).
// Then counters[s] += 1 (mod 2^32). One thread per slot: a slot's counter is read and written
// by its own thread only, so a launch needs no ordering between threads, and a CUDA graph that
// holds the launch draws new actions on every replay.
//
// The parameters of components 0-3 come by value (kernel arguments, GvComponents::first):
// the draw then needs only the seed and the counter from memory, one round trip. Components
// from 4 on are read from start/count (low/high) before their block's draw.
#include "common/rng.cuh"

// One Discrete / MultiDiscrete component (start and count: the space's): a word to a value.
struct GvDiscreteComponent {
  long long start, count;
  GV_HD long long operator()(uint32_t word) const {
    return start + (long long)(((uint64_t)word * (uint64_t)count) >> 32);
  }
};

// One bounded Box component.
struct GvBoxComponent {
  float low, high;
  GV_HD float operator()(uint32_t word) const {
    return gv_uniform_range(gv_uniform01(word), low, high);
  }
};

// The components of an action space: the first four held by value, every one readable
// through the two arrays (dims entries each: start and count, or low and high).
template <class C, class V>
struct GvComponents {
  C first[4];
  const V* a;
  const V* b;
  GV_HD C load(int k) const { return C{a[k], b[k]}; }
  // The arrays' first min(dims, 4) components copied into `first` (host-side callers).
  GV_HD static GvComponents from_arrays(const V* a, const V* b, int dims) {
    GvComponents all{{}, a, b};
    for (int k = 0; k < 4 && k < dims; ++k) all.first[k] = all.load(k);
    return all;
  }
};
using GvDiscreteComponents = GvComponents<GvDiscreteComponent, long long>;
using GvBoxComponents = GvComponents<GvBoxComponent, float>;

// The `dims` components of slot `slot`'s action into out[0 .. dims-1].
template <class T, class Components>
GV_HD void gv_sample_slot(long long seed, long long slot, uint32_t counter, int dims,
                          const Components& components, T* out) {
  const GvWords4 first = gv_random_block(seed, slot, (long long)counter, 0u, GV_STREAM_ACTIONS);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (k < dims) out[k] = components.first[k](first.w[k]);
  }
  for (int block = 1; 4 * block < dims; ++block) {
    decltype(components.load(0)) component[4] = {};
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      if (4 * block + lane < dims) component[lane] = components.load(4 * block + lane);
    }
    const GvWords4 w = gv_random_block(seed, slot, (long long)counter, (uint32_t)block,
                                       GV_STREAM_ACTIONS);
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      if (4 * block + lane < dims) out[4 * block + lane] = component[lane](w.w[lane]);
    }
  }
}

#ifdef __CUDACC__
// One thread per slot: out (n, dims); counters (n,) uint32 (stored as int32); seeds
// (n / slots_per_seed,) int64.
template <class T, class Components>
__device__ void gv_sample_actions(T* out, unsigned int* counters, const long long* seeds,
                                  const Components& components, int n, int slots_per_seed,
                                  int dims) {
  const int slot = blockIdx.x * blockDim.x + threadIdx.x;
  if (slot >= n) return;
  const unsigned int counter = counters[slot];
  // (A slot per env: no integer division on the way to the seed's load.)
  const long long seed = seeds[slots_per_seed == 1 ? slot : slot / slots_per_seed];
  gv_sample_slot(seed, slot, counter, dims, components, out + (long long)slot * dims);
  counters[slot] = counter + 1u;
}

// The arguments that stay the same for a sampler come first (the host packs them once), the
// seeds and the output last.
// start, count: (dims,) int64; start<k>, count<k>: their first four entries (0 past dims).
extern "C" __global__ void sample_discrete_actions(
    unsigned int* __restrict__ counters, const long long* __restrict__ start,
    const long long* __restrict__ count, long long start0, long long start1, long long start2,
    long long start3, long long count0, long long count1, long long count2, long long count3,
    int n, int slots_per_seed, int dims, const long long* __restrict__ seeds,
    long long* __restrict__ out) {
  const GvDiscreteComponents components{
      {{start0, count0}, {start1, count1}, {start2, count2}, {start3, count3}}, start, count};
  gv_sample_actions(out, counters, seeds, components, n, slots_per_seed, dims);
}

// low, high: (dims,) float32, finite; low<k>, high<k>: their first four entries (0 past dims).
extern "C" __global__ void sample_box_actions(
    unsigned int* __restrict__ counters, const float* __restrict__ low,
    const float* __restrict__ high, float low0, float low1, float low2, float low3, float high0,
    float high1, float high2, float high3, int n, int slots_per_seed, int dims,
    const long long* __restrict__ seeds, float* __restrict__ out) {
  const GvBoxComponents components{
      {{low0, high0}, {low1, high1}, {low2, high2}, {low3, high3}}, low, high};
  gv_sample_actions(out, counters, seeds, components, n, slots_per_seed, dims);
}
#endif
