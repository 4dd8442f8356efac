// What a classic step's memory traffic alone attains: kernels that read and write exactly the
// per-env arrays of a step kernel (common/single_agent_kernels.cuh, gv_step_env: action, pending flag,
// elapsed, state fields in; elapsed, state fields, obs row, reward, terminated, truncated,
// invalid flag out), in the same layout and access widths, with no arithmetic beyond what
// keeps the loads live. scripts/bench_bandwidth_ceiling.py times them against the step kernels.
//
// -DSTATE_DIM, -DOBS_DIM, -DACTION_T (long long or float) size one env's arrays.
#include "common/index.cuh"

#ifndef STATE_DIM
#define STATE_DIM 4
#define OBS_DIM 4
#define ACTION_T long long
#endif

// One env per thread, as <name>_step: every load first, then every store.
extern "C" __global__ void step_traffic(const ACTION_T* __restrict__ action,
                                        const bool* __restrict__ pending_in,
                                        int* __restrict__ elapsed, float* __restrict__ state,
                                        float* __restrict__ obs, float* __restrict__ reward,
                                        bool* __restrict__ terminated,
                                        bool* __restrict__ truncated,
                                        bool* __restrict__ invalid, int n) {
  GV_FOR_EACH_ENV(i, n) {
    const ACTION_T a = action[i];
    const bool p = pending_in[i];
    const int e = elapsed[i];
    float s[STATE_DIM];
#pragma unroll
    for (int k = 0; k < STATE_DIM; ++k) s[k] = state[(long long)k * n + i];
    const float shift = (float)a + (p ? 1.0f : 0.0f);
    float o[OBS_DIM];
#pragma unroll
    for (int k = 0; k < OBS_DIM; ++k) o[k] = s[k % STATE_DIM] + shift;
#pragma unroll
    for (int k = 0; k < STATE_DIM; ++k) state[(long long)k * n + i] = s[k] + shift;
    elapsed[i] = e + 1;
    gv_store_row<OBS_DIM>(obs, i, o);
    reward[i] = shift;
    terminated[i] = e > 1000000;
    truncated[i] = e > 2000000;
    invalid[i] = p;
  }
}

// The same bytes per env as a plain copy: half read, half written, float4 accesses.
extern "C" __global__ void copy_traffic(const float4* __restrict__ src, float4* __restrict__ dst,
                                        long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4;
       i += (long long)blockDim.x * gridDim.x) {
    dst[i] = src[i];
  }
}
