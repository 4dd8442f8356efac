// What the kernels of multi-agent games share (tag.cu, tag_grid.cu): the phases of a step,
// the agent a thread runs, the per-game autoreset bookkeeping, and the table that lets the
// host check its kernel binding. gpu_vecenv/multi_agent/cuda_backend.py launches them and
// reads GV_GAME_MAX_BLOCK and GvGamePhase from this file's text.
//
// A game kernel runs G games of A agents, one thread per agent; each game gets
// blocks_per_game = ceil(A / blockDim.x) consecutive blocks, so a game of any size runs and
// no block ever waits on another. Its arguments, in order:
//
//   (Consts, State, Buffers, Outputs, const long long* action, const bool* mask,
//    int blocks_per_game, int mode, int first_phase, int last_phase)
//
// Buffers start with the runtime's (gpu_vecenv.multi_agent.buffers.GameBuffers):
//   seed (G,) int64, rng_counter (G,) int64, pending (G,) bool, invalid_action (G*A,) bool,
//   error_count () int32, then the game's scratch (zero between steps), among them
//   game_bad (G,) int (invalid actions this step) and game_ended (G,) int;
// Outputs: obs (G*A, obs_dim), reward (G*A,), terminated, truncated, final_obs (null
//   unless SAME_STEP), active (G*A,) bool (the slot's observation is live after the step).
//
// A step runs the phases kValidate ... kObserveStep (SAME_STEP adds kFinalObs and
// kSameStepReset); every phase only reads what earlier phases wrote, and per-game sums
// use integer atomics (order-independent), so results never depend on thread timing. With
// one block per game one launch runs all phases, separated by __syncthreads(); otherwise
// the host launches one phase at a time. A binding may also name a packed step (several
// games of at most 16 agents a one-warp block: GameKernelBinding.packed_step), which
// lays its games out itself.
#pragma once

#include "autoreset_modes.cuh"  // GV_AUTORESET_*: the modes as passed to the kernels
#include "consts.cuh"           // GV_CONST_MEMBER, GV_CONST_TEXT: one field list, two expansions

#define GV_GAME_MAX_BLOCK 256
// The most threads of a one-block launch with several threads per agent (a binding's
// threads_per_agent above 1); the kernels launched so declare it as their launch bound.
#define GV_GAME_MAX_SPLIT_BLOCK 512

enum GvGamePhase {
  kValidate = 0,    // check the actions; count invalid ones per game (game_bad)
  kMove,            // move (or, NEXT_STEP, reset a game that ended last step); t += 1
  kInteract,        // what agents do to each other (Tag: tags), counted per game
  kFinish,          // rewards of the interactions; terminated / truncated; active
  kFinalObs,        // SAME_STEP: final_obs
  kSameStepReset,   // SAME_STEP: reset the games that ended
  kObserveStep,     // observations; the game's pending flag, RNG counter and scratch
  kResetAgents,     // reset(): fresh agents of the masked games
  kResetGames,      // reset(): their RNG counters and pending flags
  kObserveOnly      // observations of the current state
};

// The agent a thread runs: game g, agent a, slot g * A + a.
struct Agent {
  int g, a;
  long long slot;
  bool on;                    // a < A (the last block of a game may be partly idle)
};

// Declares `Agent ag`, the agent this thread runs. (A macro for the reason given at
// GV_PENDING_AFTER: as an inlined function returning the struct, nvcc's code differs.)
#define GV_GAME_AGENT(ag, num_agents, blocks_per_game)                           \
  Agent ag;                                                                      \
  ag.g = blockIdx.x / (blocks_per_game);                                         \
  ag.a = (blockIdx.x % (blocks_per_game)) * blockDim.x + threadIdx.x;            \
  ag.on = ag.a < (num_agents);                                                   \
  ag.slot = (long long)ag.g * (num_agents) + ag.a;

// The game steps this step: its actions are valid, and it does not wait for a reset.
template <class Buffers>
__device__ __forceinline__ bool gv_game_stepping(const Buffers& b, int g, int mode) {
  return b.game_bad[g] == 0 && (mode == GV_AUTORESET_SAME_STEP || !b.pending[g]);
}

// NEXT_STEP: the game ended on the last step and resets instead of stepping.
template <class Buffers>
__device__ __forceinline__ bool gv_game_resetting(const Buffers& b, int g, int mode) {
  return mode == GV_AUTORESET_NEXT_STEP && b.game_bad[g] == 0 && b.pending[g];
}

// Declares pending_after: the game's pending flag after this step (as
// gv_finish_game_autoreset will write it), for outputs.active. A macro, not a function:
// nvcc builds an inlined function's result into different (equivalent) predicate code,
// and the kernels keep the instructions they had before this header existed.
#define GV_PENDING_AFTER(pending_after, pending, ended, bad, mode)                \
  bool pending_after = (pending) || (ended);                                     \
  if ((mode) == GV_AUTORESET_NEXT_STEP) pending_after = (ended) || ((pending) && (bad)); \
  if ((mode) == GV_AUTORESET_SAME_STEP) pending_after = false;

// gv_finish_game_autoreset from the flags the caller already holds (a kernel that keeps
// a game's flags in registers): bad, pending (as at the start of the step) and ended (the
// game stepped and ended). The same writes; the RNG counter is read only where it advances.
template <class Buffers>
__device__ __forceinline__ void gv_store_game_autoreset(const Buffers& b, int g, int mode,
                                                        bool bad, bool pending, bool ended) {
  if (mode == GV_AUTORESET_NEXT_STEP) {
    if (!bad && pending) b.rng_counter[g] += 1;
    b.pending[g] = ended || (pending && bad);
  } else if (mode == GV_AUTORESET_SAME_STEP) {
    if (ended) b.rng_counter[g] += 1;
    b.pending[g] = false;
  } else {
    b.pending[g] = pending || ended;
  }
}

// End of a step, by agent 0 after every other read of them: the game's pending flag and
// RNG counter, as MultiAgentTorchBackend.step updates them. The caller then zeroes the
// game's scratch.
template <class Buffers>
__device__ __forceinline__ void gv_finish_game_autoreset(const Buffers& b, int g, int mode) {
  const bool bad = b.game_bad[g] != 0;
  const bool pending = b.pending[g];
  const bool ended = gv_game_stepping(b, g, mode) && b.game_ended[g] != 0;
  gv_store_game_autoreset(b, g, mode, bad, pending, ended);
}

// kResetGames: a reset game's stream advances and it no longer waits.
template <class Buffers>
__device__ __forceinline__ void gv_reset_game(const Buffers& b, const Agent ag,
                                              const bool* mask) {
  if (ag.on && ag.a == 0 && (mask == nullptr || mask[ag.g])) {
    b.rng_counter[ag.g] += 1;
    b.pending[ag.g] = false;
  }
}

// The constants struct of a game and the table the host checks its binding against, from
// one field list naming each field once, in order, with its type (int or float; the
// field macros of common/consts.cuh, so both layout tables read alike), e.g.
//
//   #define TAG_CONSTS(FIELD) FIELD(int, num_agents) FIELD(float, grid_length)
//   GV_GAME_CONSTS(TagConsts, tag, TAG_CONSTS)
//
// declares `struct TagConsts { int num_agents; float grid_length; };` and
// `__device__ char tag_consts_layout[] = "int num_agents;float grid_length;"`.
#define GV_GAME_CONSTS(type_name, env, LIST) \
  struct type_name {                         \
    LIST(GV_CONST_MEMBER)                    \
  };                                         \
  __device__ char env##_consts_layout[] = LIST(GV_CONST_TEXT);
