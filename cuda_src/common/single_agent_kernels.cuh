// The kernels of a single-agent env (cuda_src/<env>.cu), all but its own math: reset from
// the RNG, time limit, the three autoreset modes, invalid-action handling, the observation
// writes, and GV_DEFINE_KERNELS, which emits the env's extern "C" step / reset / observe
// kernels. They mirror gpu_vecenv/backends/torch_backend.py line for line (the multi-agent
// counterpart is games.cuh); an env only supplies a struct
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
// (tests/host_kernels/ checks it against the torch reference on a machine without a GPU).
#pragma once

#include "autoreset_modes.cuh"
#include "consts.cuh"
#include "index.cuh"
#include "rng.cuh"

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
// stream. The caller zeroes the episode clock and clears the pending flag.
template <class Env>
GV_HD void gv_draw_reset_state(const typename Env::Consts& c, const GvEnvBuffers& b, int i,
                               long long seed, long long counter, float (&s)[Env::kStateDim]) {
  float u[Env::kResetDraws];
  gv_random_uniforms<Env::kResetDraws>(seed, (long long)i, counter, GV_STREAM_RESET, u);
  Env::reset(c, u, s);
  b.rng_counter[i] = counter + 1;
}

template <class Env>
GV_HD void gv_draw_reset_state(const typename Env::Consts& c, const GvEnvBuffers& b, int i,
                               float (&s)[Env::kStateDim]) {
  gv_draw_reset_state<Env>(c, b, i, b.seed[i], b.rng_counter[i], s);
}

// gv_draw_reset_state, then the episode clock zeroed and the pending flag cleared
// (TorchBackend._reset_where).
template <class Env>
GV_HD void gv_reset_env(const typename Env::Consts& c, const GvEnvBuffers& b, int i,
                        float (&s)[Env::kStateDim]) {
  gv_draw_reset_state<Env>(c, b, i, s);
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

// One env's step in registers: its inputs as loaded, updated in place by gv_step_math.
template <class Env>
struct GvEnvStep {
  typename Env::ActionT a[Env::kActionDim];
  float s[Env::kStateDim];
  int elapsed;        // steps taken in the episode (after the step: the new count)
  bool pending;       // autoreset pending (after the step: the new flag)
  float reward;
  bool terminated;
  bool truncated;
  bool valid;         // the action was valid; if not, s, elapsed are unchanged
  bool rng_loaded;    // seed and rng_counter hold the env's (else a reset loads them)
  long long seed;
  long long rng_counter;
};

// A reset's draw inside a step, from the prefetched stream position where there is one.
template <class Env>
GV_HD void gv_step_reset_draw(const typename Env::Consts& c, const GvEnvBuffers& b, int i,
                              GvEnvStep<Env>& e) {
  if (e.rng_loaded) {
    gv_draw_reset_state<Env>(c, b, i, e.seed, e.rng_counter, e.s);
  } else {
    gv_draw_reset_state<Env>(c, b, i, e.s);
  }
}

// The arithmetic of one env of TorchBackend.step on loaded values: action check, dynamics,
// reward, termination, time limit and autoreset. Touches memory only on the rare paths:
// a reset's RNG draw (rng_counter, seed) and SAME_STEP's final_obs row.
template <class Env>
GV_HD void gv_step_math(const typename Env::Consts& c, const GvEnvBuffers& b, float* final_obs,
                        int i, int max_episode_steps, int mode, GvEnvStep<Env>& e) {
  e.valid = Env::action_valid(c, e.a);
  e.reward = 0.0f;
  e.terminated = false;
  e.truncated = false;
  const int elapsed = e.elapsed + 1;
  if (e.valid && !(mode == GV_AUTORESET_NEXT_STEP && e.pending)) {
    e.terminated = Env::step(c, e.s, e.a, &e.reward);
    e.truncated = max_episode_steps > 0 && elapsed >= max_episode_steps;
    const bool done = e.terminated || e.truncated;
    if (mode == GV_AUTORESET_SAME_STEP) {
      gv_write_obs<Env>(c, e.s, final_obs, i);
      if (done) {
        gv_step_reset_draw<Env>(c, b, i, e);
        e.elapsed = 0;
      } else {
        e.elapsed = elapsed;
      }
      e.pending = false;
    } else {
      e.elapsed = elapsed;
      e.pending = done;
    }
  } else if (e.valid) {
    // NEXT_STEP: the episode ended on the last step; this step only resets.
    gv_step_reset_draw<Env>(c, b, i, e);
    e.elapsed = 0;
    e.pending = false;
  } else if (mode == GV_AUTORESET_SAME_STEP) {
    // Invalid action: the env is left exactly as it was.
    gv_write_obs<Env>(c, e.s, final_obs, i);
    e.pending = false;
  }
}

// One env of TorchBackend.step, one thread: gv_step_math between its loads and stores.
// Returns whether the action was invalid. prefetch_rng: the env's seed and RNG counter
// are loaded with the step's other inputs, whether or not it resets (<name>_step_small).
template <class Env>
GV_HD bool gv_step_env(const typename Env::Consts& c, const GvStatePtrs<Env::kStateDim>& sp,
                       const GvEnvBuffers& b, const typename Env::ActionT* action,
                       const GvStepOutputs& out, int i, int max_episode_steps, int mode,
                       bool prefetch_rng) {
  // Every load first, none behind a branch: they are all in flight together.
  GvEnvStep<Env> e;
  e.rng_loaded = prefetch_rng;
  e.seed = prefetch_rng ? b.seed[i] : 0;
  e.rng_counter = prefetch_rng ? b.rng_counter[i] : 0;
#pragma unroll
  for (int k = 0; k < Env::kActionDim; ++k) e.a[k] = action[(long long)i * Env::kActionDim + k];
  const bool pending = b.autoreset_pending[i];
  e.pending = pending;
  e.elapsed = b.elapsed[i];
  gv_load_state<Env::kStateDim>(sp, i, e.s);
  gv_step_math<Env>(c, b, out.final_obs, i, max_episode_steps, mode, e);
  if (e.valid) {
    b.elapsed[i] = e.elapsed;
    gv_store_state<Env::kStateDim>(sp, i, e.s);
  }
  if (e.pending != pending) b.autoreset_pending[i] = e.pending;
  gv_write_obs<Env>(c, e.s, out.obs, i);
  out.reward[i] = e.reward;
  out.terminated[i] = e.terminated;
  out.truncated[i] = e.truncated;
  b.invalid_action[i] = !e.valid;
  return !e.valid;
}

// Which per-env arrays of a step start where blocks of E envs can be read and written whole
// (gv_step_block). Torch's allocations are 256-byte aligned, so `arrays` holds unless an
// action or output is an offset view; the state fields are the rows of one (fields, n)
// tensor (gpu_vecenv.buffers.EnvBuffers), so `state_rows` holds only when n % E == 0.
struct GvChunkLayout {
  bool arrays;      // action, elapsed, flags, obs, reward: blocks (else one env at a time)
  bool state_rows;  // every state field: blocks (else E scalar accesses per field)
};

template <class Env, int E>
GV_HD GvChunkLayout gv_chunk_layout(const GvStatePtrs<Env::kStateDim>& sp,
                                    const GvEnvBuffers& b, const typename Env::ActionT* action,
                                    const GvStepOutputs& out) {
  GvChunkLayout layout;
  layout.arrays = gv_block_aligned<typename Env::ActionT, E * Env::kActionDim>(action) &&
                  gv_block_aligned<bool, E>(b.autoreset_pending) &&
                  gv_block_aligned<bool, E>(b.invalid_action) &&
                  gv_block_aligned<int, E>(b.elapsed) &&
                  gv_block_aligned<float, E * Env::kObsDim>(out.obs) &&
                  gv_block_aligned<float, E>(out.reward) &&
                  gv_block_aligned<bool, E>(out.terminated) &&
                  gv_block_aligned<bool, E>(out.truncated);
  layout.state_rows = true;
#pragma unroll
  for (int k = 0; k < Env::kStateDim; ++k) {
    layout.state_rows = layout.state_rows && gv_block_aligned<float, E>(sp.field[k]);
  }
  return layout;
}

// Envs first .. first + E - 1 of TorchBackend.step, all in range, one thread: each per-env
// array is read and written as one block of E consecutive values (E = 4: a 128-bit access
// per state field, one 32-bit word for four bool flags), every load of the E envs issued
// before the first env's math. The arrays must be aligned (GvChunkLayout::arrays); the
// state fields are read in blocks where `state_rows` (else value by value).
// Returns how many of the E actions were invalid.
template <class Env, int E>
GV_HD int gv_step_block(const typename Env::Consts& c, const GvStatePtrs<Env::kStateDim>& sp,
                        const GvEnvBuffers& b, const typename Env::ActionT* action,
                        const GvStepOutputs& out, int first, int max_episode_steps, int mode,
                        bool state_rows) {
  typedef typename Env::ActionT ActionT;
  constexpr int kS = Env::kStateDim, kA = Env::kActionDim, kO = Env::kObsDim;
  ActionT a[E * kA];
  bool pending[E];
  int elapsed[E];
  float s[kS][E];
  gv_load_block<ActionT, E * kA>(action + (long long)first * kA, a);
  gv_load_block<bool, E>(b.autoreset_pending + first, pending);
  gv_load_block<int, E>(b.elapsed + first, elapsed);
#pragma unroll
  for (int k = 0; k < kS; ++k) gv_load_values<float, E>(sp.field[k] + first, s[k], state_rows);

  float obs[E * kO], reward[E];
  bool terminated[E], truncated[E], new_pending[E], invalid[E];
  int invalid_count = 0;
  bool pending_changed = false;
#pragma unroll
  for (int j = 0; j < E; ++j) {
    GvEnvStep<Env> e;
#pragma unroll
    for (int k = 0; k < kA; ++k) e.a[k] = a[j * kA + k];
#pragma unroll
    for (int k = 0; k < kS; ++k) e.s[k] = s[k][j];
    e.elapsed = elapsed[j];
    e.pending = pending[j];
    e.rng_loaded = false;
    gv_step_math<Env>(c, b, out.final_obs, first + j, max_episode_steps, mode, e);
    // An invalid action leaves s and elapsed as they were: storing them back is a no-op.
#pragma unroll
    for (int k = 0; k < kS; ++k) s[k][j] = e.s[k];
    elapsed[j] = e.elapsed;
    pending_changed = pending_changed || e.pending != pending[j];
    new_pending[j] = e.pending;
    float o[kO];
    Env::observe(c, e.s, o);
#pragma unroll
    for (int k = 0; k < kO; ++k) obs[j * kO + k] = o[k];
    reward[j] = e.reward;
    terminated[j] = e.terminated;
    truncated[j] = e.truncated;
    invalid[j] = !e.valid;
    invalid_count += !e.valid;
  }
#pragma unroll
  for (int k = 0; k < kS; ++k) gv_store_values<float, E>(sp.field[k] + first, s[k], state_rows);
  gv_store_block<int, E>(b.elapsed + first, elapsed);
  // As in gv_step_env, the pending flags are written only when one of them changed.
  if (pending_changed) gv_store_block<bool, E>(b.autoreset_pending + first, new_pending);
  gv_store_block<float, E * kO>(out.obs + (long long)first * kO, obs);
  gv_store_block<float, E>(out.reward + first, reward);
  gv_store_block<bool, E>(out.terminated + first, terminated);
  gv_store_block<bool, E>(out.truncated + first, truncated);
  gv_store_block<bool, E>(b.invalid_action + first, invalid);
  return invalid_count;
}

// Envs first .. first + E - 1 of TorchBackend.step (those below num_envs), one thread:
// gv_step_block where the E envs are in range and `layout.arrays` (gv_chunk_layout), else
// gv_step_env per env (the tail num_envs % E, or unaligned arrays). Returns how many of
// the actions were invalid. prefetch_rng: see gv_step_env (the block path never does).
template <class Env, int E>
GV_HD int gv_step_chunk(const typename Env::Consts& c, const GvStatePtrs<Env::kStateDim>& sp,
                        const GvEnvBuffers& b, const typename Env::ActionT* action,
                        const GvStepOutputs& out, int first, int num_envs, int max_episode_steps,
                        int mode, GvChunkLayout layout, bool prefetch_rng) {
  if constexpr (E > 1) {
    if (layout.arrays && num_envs - first >= E) {
      return gv_step_block<Env, E>(c, sp, b, action, out, first, max_episode_steps, mode,
                                   layout.state_rows);
    }
  }
  int invalid = 0;
#pragma unroll 1  // the rare path: one copy of the env's code, not E
  for (int j = 0; j < E; ++j) {
    if (first + j < num_envs) {
      invalid += gv_step_env<Env>(c, sp, b, action, out, first + j, max_episode_steps, mode,
                                  prefetch_rng);
    }
  }
  return invalid;
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
//   <name>_step_small(the arguments of <name>_step): the same step, one env per thread,
//               for launches of few envs (the loader's choice: SMALL_STEP_MAX_ENVS in
//               gpu_vecenv/backends/cuda.py). Such a launch is latency-bound, a few warps
//               per SM at most, so every env's seed and RNG counter are loaded with its
//               other inputs: an env that resets then draws without a second, dependent
//               round trip to memory. (16 bytes more per env, which stay in L2 at these
//               sizes; <name>_step reads them only in the envs that reset, and keeps the
//               registers that its bandwidth-bound launches need for occupancy.)
// Invalid actions are counted with one atomic per thread that saw any (rare by construction).
// Also exports <name>_consts_layout, the text of Env::Consts (consts.cuh) the loader checks,
// and <name>_envs_per_thread (GV_ENVS_PER_THREAD), by which the loader sizes the step grid.
//
// Build options (-D flags; gpu_vecenv/backends/cuda.py passes them, see its docstring):
//   GV_ENVS_PER_THREAD (1, 2 or 4; default 1): the step kernel gives each thread that many
//     consecutive envs (gv_step_chunk), so it launches ceil(num_envs / E) threads; reset and
//     observe stay one thread per env.
//   GV_STEP_MIN_BLOCKS (default: none) with GV_BLOCK_SIZE: __launch_bounds__ of the step
//     kernel, asking ptxas to fit that many blocks of GV_BLOCK_SIZE threads on an SM.
#ifndef GV_ENVS_PER_THREAD
#define GV_ENVS_PER_THREAD 1
#endif
static_assert(GV_ENVS_PER_THREAD == 1 || GV_ENVS_PER_THREAD == 2 || GV_ENVS_PER_THREAD == 4,
              "GV_ENVS_PER_THREAD must be 1, 2 or 4");
#ifdef GV_STEP_MIN_BLOCKS
#define GV_STEP_BOUNDS __launch_bounds__(GV_BLOCK_SIZE, GV_STEP_MIN_BLOCKS)
#else
#define GV_STEP_BOUNDS
#endif

#define GV_DEFINE_KERNELS(name, Env)                                                         \
  __device__ GvConstsText<GvConstsLayout<Env>::kSize> name##_consts_layout =                 \
      gv_consts_text<Env>();                                                                 \
  __device__ int name##_envs_per_thread = GV_ENVS_PER_THREAD;                                \
  extern "C" __global__ void GV_STEP_BOUNDS name##_step(                                     \
      const Env::Consts c, const GvStatePtrs<Env::kStateDim> sp, const GvEnvBuffers b,       \
      const Env::ActionT* __restrict__ action, const GvStepOutputs out, int num_envs,        \
      int max_episode_steps, int autoreset_mode) {                                           \
    constexpr int kE = GV_ENVS_PER_THREAD;                                                   \
    const GvChunkLayout layout = gv_chunk_layout<Env, kE>(sp, b, action, out);               \
    GV_FOR_EACH_ENV(chunk, num_envs / kE + (num_envs % kE != 0)) {                           \
      const int invalid = gv_step_chunk<Env, kE>(c, sp, b, action, out, chunk * kE,          \
                                                 num_envs, max_episode_steps,                \
                                                 autoreset_mode, layout, false);             \
      if (invalid) atomicAdd(b.error_count, invalid);                                        \
    }                                                                                        \
  }                                                                                          \
  extern "C" __global__ void name##_step_small(                                              \
      const Env::Consts c, const GvStatePtrs<Env::kStateDim> sp, const GvEnvBuffers b,       \
      const Env::ActionT* __restrict__ action, const GvStepOutputs out, int num_envs,        \
      int max_episode_steps, int autoreset_mode) {                                           \
    GV_FOR_EACH_ENV(i, num_envs) {                                                           \
      if (gv_step_env<Env>(c, sp, b, action, out, i, max_episode_steps, autoreset_mode,      \
                           true)) {                                                          \
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
