// The generic parts of every single-agent kernel: reset from the RNG, time limit, the
// three autoreset modes, invalid-action handling and the observation writes. They mirror
// gpu_vecenv/backends/torch_backend.py line for line; an env only supplies a struct
//
//   struct Env {
//     static constexpr int kStateDim, kObsDim, kResetDraws, kActionDim;
//     typedef ... ActionT;                 // long long (Discrete) or float (Box)
//     GV_CONSTS(ENV_CONSTS);               // struct Consts, from a field list (consts.cuh),
//                                          // filled by the env's Python KernelBinding
//     static bool action_valid(const Consts&, const ActionT (&a)[kActionDim]);
//     static void reset(const Consts&, const float (&u)[kResetDraws], float (&s)[kStateDim]);
//     static bool step(const Consts&, float (&s)[kStateDim], const ActionT (&a)[kActionDim],
//                      float* reward);         // returns terminated; s updated in place
//     static void observe(const Consts&, const float (&s)[kStateDim], float (&o)[kObsDim]);
//   };
//
// with every function GV_HD, so the env's math also compiles and runs on the host
// (tests/cuda/ checks it against the torch reference on a machine without a GPU).
#pragma once

#include "consts.cuh"
#include "index.cuh"
#include "rng.cuh"

// Values of gymnasium.vector.AutoresetMode as passed to the kernels.
#define GV_AUTORESET_NEXT_STEP 0
#define GV_AUTORESET_SAME_STEP 1
#define GV_AUTORESET_DISABLED 2

// Pointers to the env's state fields, one (n,) float32 tensor each, in state_fields order.
template <int kStateDim>
struct GvStatePtrs {
  float* field[kStateDim];
};

// The persistent per-env buffers of gpu_vecenv.buffers.EnvBuffers (state aside).
struct GvEnvBuffers {
  int* elapsed;               // (n,) int32
  long long* rng_counter;     // (n,) int64
  const long long* seed;      // (n,) int64
  bool* autoreset_pending;    // (n,) bool
  bool* invalid_action;       // (n,) bool
  int* error_count;           // () int32
};

// gpu_vecenv.buffers.StepOutputs; final_obs is null unless the mode is SAME_STEP.
struct GvStepOutputs {
  float* obs;                 // (n, obs_dim) float32
  float* reward;              // (n,) float32
  bool* terminated;           // (n,) bool
  bool* truncated;            // (n,) bool
  float* final_obs;           // (n, obs_dim) float32 or null
};

template <int kStateDim>
GV_HD void gv_load_state(const GvStatePtrs<kStateDim>& ptrs, int i, float (&s)[kStateDim]) {
#pragma unroll
  for (int k = 0; k < kStateDim; ++k) s[k] = ptrs.field[k][i];
}

template <int kStateDim>
GV_HD void gv_store_state(const GvStatePtrs<kStateDim>& ptrs, int i, const float (&s)[kStateDim]) {
#pragma unroll
  for (int k = 0; k < kStateDim; ++k) ptrs.field[k][i] = s[k];
}

// Fresh initial state of env i from draw number rng_counter[i] of its stream; advances the
// stream, zeroes the episode clock and clears the pending flag (TorchBackend._reset_where).
template <class Env>
GV_HD void gv_reset_env(const typename Env::Consts& c, const GvEnvBuffers& b, int i,
                        float (&s)[Env::kStateDim]) {
  const long long counter = b.rng_counter[i];
  float u[Env::kResetDraws];
  gv_random_uniforms<Env::kResetDraws>(b.seed[i], (long long)i, counter, GV_STREAM_RESET, u);
  Env::reset(c, u, s);
  b.rng_counter[i] = counter + 1;
  b.elapsed[i] = 0;
  b.autoreset_pending[i] = false;
}

template <class Env>
GV_HD void gv_write_obs(const typename Env::Consts& c, const float (&s)[Env::kStateDim],
                        float* out, int i) {
  float o[Env::kObsDim];
  Env::observe(c, s, o);
  gv_store_row<Env::kObsDim>(out, i, o);
}

// One env of TorchBackend.step: action check, dynamics, reward, termination, time limit,
// autoreset and the outputs. Returns whether the action was invalid.
template <class Env>
GV_HD bool gv_step_env(const typename Env::Consts& c, const GvStatePtrs<Env::kStateDim>& sp,
                       const GvEnvBuffers& b, const typename Env::ActionT* action,
                       const GvStepOutputs& out, int i, int max_episode_steps, int mode) {
  // Every load first, none behind a branch: they are all in flight together.
  typename Env::ActionT a[Env::kActionDim];
#pragma unroll
  for (int k = 0; k < Env::kActionDim; ++k) a[k] = action[(long long)i * Env::kActionDim + k];
  const bool pending = b.autoreset_pending[i];
  const int elapsed = b.elapsed[i] + 1;
  float s[Env::kStateDim];
  gv_load_state<Env::kStateDim>(sp, i, s);
  const bool valid = Env::action_valid(c, a);
  float reward = 0.0f;
  bool terminated = false;
  bool truncated = false;
  bool new_pending = pending;
  if (valid && !(mode == GV_AUTORESET_NEXT_STEP && pending)) {
    terminated = Env::step(c, s, a, &reward);
    truncated = max_episode_steps > 0 && elapsed >= max_episode_steps;
    const bool done = terminated || truncated;
    if (mode == GV_AUTORESET_SAME_STEP) {
      gv_write_obs<Env>(c, s, out.final_obs, i);
      if (done) {
        gv_reset_env<Env>(c, b, i, s);
      } else {
        b.elapsed[i] = elapsed;
      }
      new_pending = false;
    } else {
      b.elapsed[i] = elapsed;
      new_pending = done;
    }
    gv_store_state<Env::kStateDim>(sp, i, s);
  } else if (valid) {
    // NEXT_STEP: the episode ended on the last step; this step only resets.
    gv_reset_env<Env>(c, b, i, s);
    gv_store_state<Env::kStateDim>(sp, i, s);
    new_pending = false;
  } else {
    // Invalid action: the env is left exactly as it was.
    if (mode == GV_AUTORESET_SAME_STEP) {
      gv_write_obs<Env>(c, s, out.final_obs, i);
      new_pending = false;
    }
  }
  if (new_pending != pending) b.autoreset_pending[i] = new_pending;
  gv_write_obs<Env>(c, s, out.obs, i);
  out.reward[i] = reward;
  out.terminated[i] = terminated;
  out.truncated[i] = truncated;
  b.invalid_action[i] = !valid;
  return !valid;
}

// One env of TorchBackend.reset: reset it if it is in the mask (null: all), clear its
// invalid-action flag, write its observation.
template <class Env>
GV_HD void gv_reset_masked_env(const typename Env::Consts& c,
                               const GvStatePtrs<Env::kStateDim>& sp, const GvEnvBuffers& b,
                               const bool* mask, float* obs, int i) {
  float s[Env::kStateDim];
  if (mask == nullptr || mask[i]) {
    gv_reset_env<Env>(c, b, i, s);
    gv_store_state<Env::kStateDim>(sp, i, s);
  } else {
    gv_load_state<Env::kStateDim>(sp, i, s);
  }
  b.invalid_action[i] = false;
  gv_write_obs<Env>(c, s, obs, i);
}

template <class Env>
GV_HD void gv_observe_env(const typename Env::Consts& c, const GvStatePtrs<Env::kStateDim>& sp,
                          float* obs, int i) {
  float s[Env::kStateDim];
  gv_load_state<Env::kStateDim>(sp, i, s);
  gv_write_obs<Env>(c, s, obs, i);
}

#ifdef __CUDACC__
// The three extern "C" kernels of an env, with fixed typed argument lists:
//   <name>_step(Consts, GvStatePtrs, GvEnvBuffers, const ActionT* action, GvStepOutputs,
//               int num_envs, int max_episode_steps (0: none), int autoreset_mode)
//   <name>_reset(Consts, GvStatePtrs, GvEnvBuffers, const bool* mask (null: all), float* obs,
//                int num_envs)
//   <name>_observe(Consts, GvStatePtrs, float* obs, int num_envs)
// Invalid actions are counted with one atomic per invalid env (rare by construction).
// Also exports <name>_consts_layout, the text of Env::Consts (consts.cuh) the loader checks.
#define GV_DEFINE_KERNELS(name, Env)                                                         \
  __device__ GvConstsText<GvConstsLayout<Env>::kSize> name##_consts_layout =                 \
      gv_consts_text<Env>();                                                                 \
  extern "C" __global__ void name##_step(                                                    \
      const Env::Consts c, const GvStatePtrs<Env::kStateDim> sp, const GvEnvBuffers b,       \
      const Env::ActionT* __restrict__ action, const GvStepOutputs out, int num_envs,        \
      int max_episode_steps, int autoreset_mode) {                                           \
    GV_FOR_EACH_ENV(i, num_envs) {                                                           \
      if (gv_step_env<Env>(c, sp, b, action, out, i, max_episode_steps, autoreset_mode)) {   \
        atomicAdd(b.error_count, 1);                                                         \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  extern "C" __global__ void name##_reset(const Env::Consts c,                               \
                                          const GvStatePtrs<Env::kStateDim> sp,              \
                                          const GvEnvBuffers b, const bool* __restrict__ mask, \
                                          float* __restrict__ obs, int num_envs) {           \
    GV_FOR_EACH_ENV(i, num_envs) { gv_reset_masked_env<Env>(c, sp, b, mask, obs, i); }        \
  }                                                                                          \
  extern "C" __global__ void name##_observe(const Env::Consts c,                             \
                                            const GvStatePtrs<Env::kStateDim> sp,            \
                                            float* __restrict__ obs, int num_envs) {         \
    GV_FOR_EACH_ENV(i, num_envs) { gv_observe_env<Env>(c, sp, obs, i); }                     \
  }
#endif
