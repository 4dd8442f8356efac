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
#include "common/rng.cuh"

// Component k of a Discrete / MultiDiscrete action (start[k] and count[k]: the space's).
struct GvDiscreteComponent {
  const long long* start;
  const long long* count;
  GV_HD long long operator()(uint32_t word, int k) const {
    return start[k] + (long long)(((uint64_t)word * (uint64_t)count[k]) >> 32);
  }
};

// Component k of a bounded Box action.
struct GvBoxComponent {
  const float* low;
  const float* high;
  GV_HD float operator()(uint32_t word, int k) const {
    return gv_uniform_range(gv_uniform01(word), low[k], high[k]);
  }
};

// The `dims` components of slot `slot`'s action into out[0 .. dims-1].
template <class T, class Component>
GV_HD void gv_sample_slot(long long seed, long long slot, uint32_t counter, int dims,
                          const Component& component, T* out) {
  for (int block = 0; 4 * block < dims; ++block) {
    const GvWords4 w = gv_random_block(seed, slot, (long long)counter, (uint32_t)block,
                                       GV_STREAM_ACTIONS);
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const int k = 4 * block + lane;
      if (k < dims) out[k] = component(w.w[lane], k);
    }
  }
}

#ifdef __CUDACC__
// One thread per slot: out (n, dims); counters (n,) uint32 (stored as int32); seeds
// (n / slots_per_seed,) int64.
template <class T, class Component>
__device__ void gv_sample_actions(T* out, unsigned int* counters, const long long* seeds,
                                  const Component& component, int n, int slots_per_seed,
                                  int dims) {
  const int slot = blockIdx.x * blockDim.x + threadIdx.x;
  if (slot >= n) return;
  const unsigned int counter = counters[slot];
  gv_sample_slot(seeds[slot / slots_per_seed], slot, counter, dims, component,
                 out + (long long)slot * dims);
  counters[slot] = counter + 1u;
}

// start, count: (dims,) int64.
extern "C" __global__ void sample_discrete_actions(
    long long* __restrict__ out, unsigned int* __restrict__ counters,
    const long long* __restrict__ seeds, const long long* __restrict__ start,
    const long long* __restrict__ count, int n, int slots_per_seed, int dims) {
  gv_sample_actions(out, counters, seeds, GvDiscreteComponent{start, count}, n,
                    slots_per_seed, dims);
}

// low, high: (dims,) float32, finite.
extern "C" __global__ void sample_box_actions(
    float* __restrict__ out, unsigned int* __restrict__ counters,
    const long long* __restrict__ seeds, const float* __restrict__ low,
    const float* __restrict__ high, int n, int slots_per_seed, int dims) {
  gv_sample_actions(out, counters, seeds, GvBoxComponent{low, high}, n, slots_per_seed, dims);
}
#endif
