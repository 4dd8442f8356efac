// Continuous Tag (envs/tag.py, docs/tag_rules.md): G games of A agents, one thread per
// agent, in the phases of common/games.cuh:
//
//   kValidate  validate the actions; count invalid ones per game (game_bad)
//   kMove      move (or, NEXT_STEP, reset a game that ended last step); base rewards; t += 1
//   kInteract  each runner finds its nearest tagger (taggers staged through shared memory);
//              tags: the runner's penalty and exit, tag_count[g][tagger] += 1, runners left
//   kFinish    taggers' tag rewards; per-slot terminated / truncated; what each slot shows
//   kFinalObs, kSameStepReset (SAME_STEP) final_obs; reset the games that ended
//   kObserveStep observations (K nearest: positions staged through shared memory tiles);
//              the game's pending flag and RNG counter; scratch counters zeroed
//
// That is run() with several blocks per game (one launch per phase, the counters in global
// scratch). A game that fits one block takes step_one_block instead: the same phases in
// one launch, the counters as block reductions and shared atomics, each agent in
// registers, the tiles filled from them; one batch of global loads per step; for launches
// too small to fill the GPU, two to four threads per agent in the K-nearest scan
// (scan_helpers); for many games of at most 16 agents, several games a warp (its packed
// form, tag_step_packed_*). Each kernel has a twin with the observation options
// (observe_own_state, egocentric: the *_options kernels), so that the kernels without
// them carry none of their code.
//
// Mirrors the torch reference operation by operation in float32; compile with -fmad=false.
// The data layout (constants, structs, shared memory) is tag_layout.cuh, the observation
// writers tag_observe.cuh; envs/tag_launch.py chooses a kernel and its launch shape.
#include "common/games.cuh"
#include "common/math.cuh"
#include "common/rng.cuh"
#include "tag_layout.cuh"  // constants, state and buffer structs, shared memory, TagAgent

// Fresh start of one agent: words 0, 1, 2 of Philox block `a` (x, y, direction).
// rng_counter: the game's counter before this step's update.
__device__ __forceinline__ TagAgent fresh_agent(const TagConsts& c, long long seed,
                                                long long rng_counter, const Agent& ag) {
  const long long index = c.fixed_start ? 0 : ag.g;
  const long long counter = c.fixed_start ? 0 : rng_counter;
  const GvWords4 w = gv_random_block(seed, index, counter, (uint32_t)ag.a, GV_STREAM_RESET);
  TagAgent v;
  v.x = gv_uniform01(w.w[0]) * c.grid_length;
  v.y = gv_uniform01(w.w[1]) * c.grid_length;
  v.direction = floorf(gv_uniform01(w.w[2]) * 4.0f) * c.half_pi;
  v.speed = 0.0f;
  v.acceleration = 0.0f;
  v.in_game = 1;
  return v;
}

__device__ void reset_agent(const TagConsts& c, const TagState& s, const TagBuffers& b,
                            const Agent& ag) {
  store_agent(s, ag.slot, fresh_agent(c, b.seed[ag.g], b.rng_counter[ag.g], ag));
}

__device__ void phase_validate(const TagConsts& c, const TagBuffers& b,
                               const long long* action, const Agent& ag) {
  const long long acc = action[2 * ag.slot], turn = action[2 * ag.slot + 1];
  const bool valid = acc >= 0 && acc < c.num_acceleration_actions && turn >= 0 &&
                     turn < c.num_turn_actions;
  b.invalid_action[ag.slot] = !valid;
  if (!valid) {
    atomicAdd(&b.game_bad[ag.g], 1);
    atomicAdd(b.error_count, 1);
  }
}

// One agent's move in a game that steps, by the values d_acc, d_turn of its actions;
// returns its base reward (edge hit and the role's step reward; 0 out of the game).
__device__ __forceinline__ float move_agent(const TagConsts& c, float d_acc, float d_turn,
                                            bool tagger, TagAgent& v) {
  const bool playing = v.in_game != 0;
  const float playing_f = playing ? 1.0f : 0.0f;
  const float direction = gv_remainder(v.direction + d_turn, c.two_pi) * playing_f;
  float acceleration = v.acceleration + d_acc;
  const float vmax = tagger ? c.vmax_tagger : c.vmax_runner;
  float speed = v.speed + acceleration;
  speed = speed < 0.0f ? 0.0f : speed;
  speed = (speed < vmax ? speed : vmax) * playing_f;
  if (!(speed > 0.0f && speed < vmax)) acceleration = 0.0f;
  float x = v.x + speed * cosf(direction);
  float y = v.y + speed * sinf(direction);
  const float L = c.grid_length;
  const bool hit = x < 0.0f || x > L || y < 0.0f || y > L;
  v.x = gv_clamp(x, 0.0f, L);
  v.y = gv_clamp(y, 0.0f, L);
  v.speed = speed;
  v.direction = direction;
  v.acceleration = acceleration;
  float reward = 0.0f;
  if (playing) reward = (hit ? c.edge_hit_penalty : 0.0f) + (tagger ? c.step_tagger : c.step_runner);
  return reward;
}

__device__ void phase_move(const TagConsts& c, const TagState& s, const TagBuffers& b,
                           const TagOutputs& o, const long long* action, const Agent& ag,
                           int mode) {
  const long long i = ag.slot;
  b.visible[i] = s.in_game[i] != 0;  // "was in the game", turned into visibility by phase F
  float reward = 0.0f;
  if (gv_game_stepping(b, ag.g, mode)) {
    TagAgent v = load_agent(s, i);
    reward = move_agent(c, b.acceleration_table[action[2 * i]], b.turn_table[action[2 * i + 1]],
                        ag.a < c.num_taggers, v);
    store_agent(s, i, v);
    if (ag.a == 0) s.t[ag.g] += 1;
  } else if (gv_game_resetting(b, ag.g, mode)) {
    reset_agent(c, s, b, ag);
    if (ag.a == 0) s.t[ag.g] = 0;
  }
  o.reward[i] = reward;
}

// Runners: nearest tagger (first minimum of the squared distance: lowest index on ties).
// Every thread of the block runs the tile loop (it holds barriers); only runners use it.
__device__ void phase_tag(const TagConsts& c, const TagState& s, const TagBuffers& b,
                          const TagOutputs& o, const Agent& ag, int mode) {
  float2* tile = reinterpret_cast<float2*>(tag_shared(c).tile);
  const long long game = (long long)ag.g * c.num_agents;
  const bool stepping = gv_game_stepping(b, ag.g, mode);
  const bool runner = ag.on && ag.a >= c.num_taggers && stepping && s.in_game[ag.slot] != 0;
  const float x = ag.on ? s.x[ag.slot] : 0.0f, y = ag.on ? s.y[ag.slot] : 0.0f;
  float best = 0.0f;
  int nearest = -1;
  for (int start = 0; start < c.num_taggers; start += blockDim.x) {
    __syncthreads();
    const int k = start + threadIdx.x;
    if (k < c.num_taggers) tile[threadIdx.x] = make_float2(s.x[game + k], s.y[game + k]);
    __syncthreads();
    const int count = min((int)blockDim.x, c.num_taggers - start);
    if (runner) {
      for (int j = 0; j < count; ++j) {
        const float2 tagger = tile[j];
        const float dx = x - tagger.x;
        const float dy = y - tagger.y;
        const float d2 = dx * dx + dy * dy;
        if (nearest < 0 || d2 < best) {
          best = d2;
          nearest = start + j;
        }
      }
    }
  }
  if (!runner) return;
  const bool tagged = sqrtf(best) < c.tag_threshold;
  float reward = o.reward[ag.slot];
  if (tagged) {
    atomicAdd(&b.tag_count[(long long)ag.g * c.num_taggers + nearest], 1);
    reward = reward + c.tag_penalty;
  }
  const bool still = !(tagged && c.exits);
  if (still) {
    atomicAdd(&b.runners_left[ag.g], 1);
    if (s.t[ag.g] == c.episode_length) reward = reward + c.end_reward;
  } else {
    s.in_game[ag.slot] = 0;
  }
  o.reward[ag.slot] = reward;
}

__device__ void phase_finish(const TagConsts& c, const TagState& s, const TagBuffers& b,
                             const TagOutputs& o, const Agent& ag, int mode) {
  const long long i = ag.slot;
  const bool stepping = gv_game_stepping(b, ag.g, mode);
  const bool playing = s.in_game[i] != 0;
  const bool was_playing = b.visible[i];
  if (stepping && ag.a < c.num_taggers) {
    const int tags = b.tag_count[(long long)ag.g * c.num_taggers + ag.a];
    o.reward[i] = o.reward[i] + (float)tags * c.tag_reward;
  }
  const bool game_terminated = stepping && b.runners_left[ag.g] == 0;
  const bool game_truncated = stepping && s.t[ag.g] >= c.episode_length;
  const bool left = stepping && was_playing && !playing;
  const bool terminated = stepping && (left || (game_terminated && playing));
  o.terminated[i] = terminated;
  o.truncated[i] = stepping && game_truncated && playing && !terminated;
  b.visible[i] = stepping ? was_playing : playing;
  const bool ended = game_terminated || game_truncated;
  if (ag.a == 0) b.game_ended[ag.g] = ended ? 1 : 0;
  const bool bad = b.game_bad[ag.g] != 0, pending = b.pending[ag.g];
  GV_PENDING_AFTER(pending_after, pending, ended, bad, mode)
  const bool in_after = (mode == GV_AUTORESET_SAME_STEP && ended) || playing;
  o.active[i] = in_after && !pending_after;
}

#include "tag_observe.cuh"  // observe_full, observe_partial, write_observation

// The game-level bookkeeping of a step, by agent 0 after every other read of it.
__device__ void finish_game(const TagConsts& c, const TagBuffers& b, const Agent& ag, int mode) {
  if (ag.on && ag.a < c.num_taggers) b.tag_count[(long long)ag.g * c.num_taggers + ag.a] = 0;
  if (ag.a != 0) return;
  const int g = ag.g;
  gv_finish_game_autoreset(b, g, mode);
  b.game_bad[g] = 0;
  b.runners_left[g] = 0;
  b.game_ended[g] = 0;
}

// Entry `index` of a table of `size` floats. A table that fits a warp comes from the
// lanes' registers (lane k holds entry k: table_lane_entry, loaded with the step's other
// loads) by a shuffle, which every lane of the warp must run; a longer one from memory.
__device__ __forceinline__ float table_lane_entry(const float* table, int size) {
  const int lane = threadIdx.x % 32;
  return lane < size ? table[lane] : 0.0f;
}

__device__ __forceinline__ float table_entry(const float* table, int size, float lane_entry,
                                             int index) {
  const float shuffled = __shfl_sync(0xffffffffu, lane_entry, index);
  return size <= 32 ? shuffled : table[index];
}

// Whether any thread of the agent's game votes (a barrier of the block, as well): the
// block's, or (kPacked) the threads of `lanes`, the game's in the warp that is the block.
template <bool kPacked>
__device__ __forceinline__ bool game_any(int vote, unsigned lanes) {
  if constexpr (kPacked) {
    __syncthreads();
    return (__ballot_sync(0xffffffffu, vote) & lanes) != 0u;
  } else {
    return __syncthreads_or(vote) != 0;
  }
}

// A whole step when a game fits one block (blocks_per_game == 1): the phases kValidate
// ... kObserveStep of run(), with the same arithmetic, cut down to the latency of a few
// barriers. Each thread's agent, action and game flags are loaded once, in one batch, and
// stay in registers to the end; the game's counters are block reductions
// (__syncthreads_or: any invalid action, any runner left) and shared atomics (tags per
// tagger), so the global scratch (game_bad, runners_left, game_ended, tag_count, visible)
// is not touched; and the tiles are filled from registers as the state changes, so
// neither the tag search nor the observations read the game back from global memory.
// Global state is written where it changes (not at all in a game with an invalid action).
// With c.scan_helpers the host launches at least (scan_helpers + 1) * A threads: threads
// from A on are idle (ag.on false) in every phase but the partial observations' scan
// (observe_partial).
//
// kPacked: one warp runs several small games (packed_games_here; the host launches
// 32-thread blocks for games of A <= 16 agents), each on its own threads and its own part
// of the tiles (game_shared), the game's reductions warp votes over its threads; the
// block's barriers are the games' barriers. The same arithmetic and the same results:
// only the agent a thread runs and where its game's tiles lie change.
// kOptions: the observation options (tag_observe.cuh).
template <int kMax, bool kWide, bool kHelpers, bool kPacked, bool kOptions>
__device__ void step_one_block(const TagConsts& c, const TagState& s, const TagBuffers& b,
                               const TagOutputs& o, const long long* __restrict__ action,
                               int mode) {
  GV_GAME_AGENT(ag, c.num_agents, 1)
  int lane0 = 0;              // the game's first thread in the block
  unsigned game_lanes = 0u;   // kPacked: the game's threads, as a lane mask
  if constexpr (kPacked) {
    static_assert(!kHelpers, "packed games have no scan helpers");
    // Thread threadIdx.x of game q = threadIdx.x / A; the threads past the block's last
    // game are idle threads of that game (agents A and up).
    const int A = c.num_agents;
    const int q = min((int)threadIdx.x / A, packed_games_here(c) - 1);
    lane0 = q * A;
    ag.g = (int)blockIdx.x * c.packed_games + q;
    ag.a = (int)threadIdx.x - lane0;
    ag.on = ag.a < A;
    ag.slot = (long long)ag.g * A + ag.a;
    game_lanes = ((1u << A) - 1u) << lane0;
  }
  const TagShared sh = kPacked ? game_shared(tag_shared(c, true), lane0) : tag_shared(c);
  const int g = ag.g;
  const long long i = ag.slot;
  const bool tagger = ag.a < c.num_taggers;
  const bool same_step = mode == GV_AUTORESET_SAME_STEP;

  // Everything the step reads from global memory, as independent loads. (A SAME_STEP
  // reset reads its RNG stream again after the observations, rather than hold it in
  // registers through them.)
  const bool pending = b.pending[g];
  const long long seed = b.seed[g], rng_counter = b.rng_counter[g];
  int t = s.t[g];
  const float acc_lane = table_lane_entry(b.acceleration_table, c.num_acceleration_actions);
  const float turn_lane = table_lane_entry(b.turn_table, c.num_turn_actions);
  long long acc = 0, turn = 0;
  TagAgent me{0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0};
  if (ag.on) {
    acc = action[2 * i];
    turn = action[2 * i + 1];
    me = load_agent(s, i);
  }
  if (kPacked ? ag.a < c.num_taggers : threadIdx.x < c.num_taggers) {
    sh.tag_count[ag.a] = 0;  // read after 2 barriers
  }

  // kValidate. A game with an invalid action stays exactly as it was.
  const bool valid = acc >= 0 && acc < c.num_acceleration_actions && turn >= 0 &&
                     turn < c.num_turn_actions;
  if (ag.on) {
    b.invalid_action[i] = !valid;
    if (!valid) atomicAdd(b.error_count, 1);
  }
  const float d_acc = table_entry(b.acceleration_table, c.num_acceleration_actions, acc_lane,
                                  valid ? (int)acc : 0);
  const float d_turn = table_entry(b.turn_table, c.num_turn_actions, turn_lane,
                                   valid ? (int)turn : 0);
  const bool bad = game_any<kPacked>(ag.on && !valid, game_lanes);
  const bool stepping = !bad && (same_step || !pending);
  const bool resetting = mode == GV_AUTORESET_NEXT_STEP && !bad && pending;

  // kMove (or NEXT_STEP's reset of a game that ended last step).
  const bool was_playing = me.in_game != 0;
  float reward = 0.0f;
  if (stepping) {
    if (ag.on) {
      reward = move_agent(c, d_acc, d_turn, tagger, me);
      store_agent(s, i, me);
    }
    t += 1;
  } else if (resetting) {
    if (ag.on) {
      me = fresh_agent(c, seed, rng_counter, ag);
      store_agent(s, i, me);
    }
    t = 0;
  }
  if (ag.a == 0 && (stepping || resetting)) s.t[g] = t;
  if (ag.on) {
    put_in_tile(c, sh, ag.a, me);
  } else if (c.scan_helpers && ag.a < c.num_agents + c.scan_helpers) {
    sh.tile[ag.a] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // out of the game: see observe_partial
  }
  __syncthreads();

  // kInteract: runners against the taggers of the tile (entries 0 .. T-1, which nobody
  // writes in this phase; a tagged runner clears only its own entry's in-game flag).
  bool runner_left = false;
  if (ag.on && !tagger && stepping && me.in_game != 0) {
    float best = 0.0f;
    int nearest = -1;
    for (int j = 0; j < c.num_taggers; ++j) {
      const float4 other = sh.tile[j];
      const float dx = me.x - other.x;
      const float dy = me.y - other.y;
      const float d2 = dx * dx + dy * dy;
      if (nearest < 0 || d2 < best) {
        best = d2;
        nearest = j;
      }
    }
    const bool tagged = sqrtf(best) < c.tag_threshold;
    if (tagged) {
      atomicAdd(&sh.tag_count[nearest], 1);
      reward = reward + c.tag_penalty;
    }
    runner_left = !(tagged && c.exits);
    if (runner_left) {
      if (t == c.episode_length) reward = reward + c.end_reward;
    } else {
      me.in_game = 0;
      s.in_game[i] = 0;
      sh.tile[ag.a].z = 0.0f;
    }
  }
  const bool any_runner_left = game_any<kPacked>(runner_left, game_lanes);

  // kFinish
  if (ag.on && stepping && tagger) reward = reward + (float)sh.tag_count[ag.a] * c.tag_reward;
  const bool playing = me.in_game != 0;
  const bool game_terminated = stepping && !any_runner_left;
  const bool game_truncated = stepping && t >= c.episode_length;
  const bool ended = game_terminated || game_truncated;
  bool visible = ag.on && (stepping ? was_playing : playing);
  if (ag.on) {
    o.reward[i] = reward;
    const bool left = stepping && was_playing && !playing;
    const bool terminated = stepping && (left || (game_terminated && playing));
    o.terminated[i] = terminated;
    o.truncated[i] = stepping && game_truncated && playing && !terminated;
    GV_PENDING_AFTER(pending_after, pending, ended, bad, mode)
    const bool in_after = (same_step && ended) || playing;
    o.active[i] = in_after && !pending_after;
  }

  // SAME_STEP: kFinalObs, the stepped game's observations; kSameStepReset, the reset of
  // a game that ended. Then kObserveStep. (A loop, so that the block's code holds one copy
  // of the observation code, not two.)
  for (bool final_obs = same_step;; final_obs = false) {
    write_observation<kMax, kWide, kHelpers, kPacked, kOptions>(
        c, s, ag, TagObserver{me, t}, true, visible, final_obs ? o.final_obs : o.obs, lane0);
    if (!final_obs) break;
    __syncthreads();  // the tiles and the staged rows are read
    if (ended) {
      if (ag.on) {
        me = fresh_agent(c, b.seed[g], b.rng_counter[g], ag);
        store_agent(s, i, me);
        put_in_tile(c, sh, ag.a, me);
      }
      t = 0;
      if (ag.a == 0) s.t[g] = 0;
    }
    visible = ag.on && (ended || me.in_game != 0);
    __syncthreads();
  }

  // The game's pending flag and RNG counter.
  if (ag.a == 0) gv_store_game_autoreset(b, g, mode, bad, pending, ended);
}

template <int kMax, bool kWide, bool kHelpers, bool kOptions>
__device__ void run(const TagConsts& c, const TagState& s, const TagBuffers& b,
                    const TagOutputs& o, const long long* __restrict__ action,
                    const bool* __restrict__ mask, int blocks_per_game, int mode,
                    int first_phase, int last_phase) {
  if (blocks_per_game == 1 && first_phase == kValidate && last_phase == kObserveStep) {
    return step_one_block<kMax, kWide, kHelpers, false, kOptions>(c, s, b, o, action, mode);
  }
  GV_GAME_AGENT(ag, c.num_agents, blocks_per_game)
  const bool same_step = mode == GV_AUTORESET_SAME_STEP;
  for (int phase = first_phase; phase <= last_phase; ++phase) {
    if (phase > first_phase) __syncthreads();
    switch (phase) {
      case kValidate:
        if (ag.on) phase_validate(c, b, action, ag);
        break;
      case kMove:
        if (ag.on) phase_move(c, s, b, o, action, ag, mode);
        break;
      case kInteract:
        phase_tag(c, s, b, o, ag, mode);
        break;
      case kFinish:
        if (ag.on) phase_finish(c, s, b, o, ag, mode);
        break;
      case kFinalObs:
        if (same_step) {
          write_observation<kMax, kWide, false, false, kOptions>(
              c, s, ag, load_observer(s, ag), false, ag.on && b.visible[ag.slot], o.final_obs);
        }
        break;
      case kSameStepReset:
        if (same_step && ag.on) {
          const bool ended = gv_game_stepping(b, ag.g, mode) && b.game_ended[ag.g] != 0;
          if (ended) {
            reset_agent(c, s, b, ag);
            if (ag.a == 0) s.t[ag.g] = 0;
          }
          b.visible[ag.slot] = ended || s.in_game[ag.slot] != 0;
        }
        break;
      case kObserveStep:
        write_observation<kMax, kWide, false, false, kOptions>(
            c, s, ag, load_observer(s, ag), false, ag.on && b.visible[ag.slot], o.obs);
        if (ag.on) finish_game(c, b, ag, mode);
        break;
      case kResetAgents:
        if (ag.on && (mask == nullptr || mask[ag.g])) {
          reset_agent(c, s, b, ag);
          if (ag.a == 0) s.t[ag.g] = 0;
        }
        break;
      case kResetGames:
        gv_reset_game(b, ag, mask);
        break;
      case kObserveOnly:
        write_observation<kMax, kWide, false, false, kOptions>(
            c, s, ag, load_observer(s, ag), false, ag.on && b.visible[ag.slot], o.obs);
        break;
    }
  }
}

// One kernel per observation layout, so each keeps only the registers it needs:
// tag_run_full, tag_run_k<kMax> for partial observations of K <= kMax others,
// tag_run_k<kMax>_wide with the four-at-a-time scan (for a few very large games), and
// tag_run_k<kMax>_helpers with scan helpers (launches of at most one block per SM; kept
// apart so that the other kernels carry none of their code or registers). Each but the
// helpers' has a tag_step_<suffix> twin: step_one_block as its own entry, which envs/tag_launch.py
// launches for games of more than 32 agents (H200: 2,000×105 103 µs a step against 114
// through run(), where ptxas spills 16 bytes instead of 56; 1×5, 2,000×5 and 100×105 were
// 0.1-0.35 µs slower with it, so they keep run()). The layouts small games use also have
// tag_step_packed_<suffix> (TAG_PACKED_KERNELS), for steps of several games a warp.
//
// Every one of them comes twice: as named, and as <name>_options, which writes the
// observation options (observe_own_state, egocentric, as c.own_state and c.egocentric ask).
// One kernel for both would cost the games without the options too: with the options'
// code behind a uniform branch, ptxas (CUDA 13, sm_90) gave tag_step_k10 64 registers and
// 4 bytes of spills instead of 78 and none, tag_step_k16 112 registers instead of 80, and
// tag_step_packed_k16 16 bytes of spills. Apart, the kernels without the options compile
// to the PTX they had before the options existed (but for the constants' offsets), with
// the same registers.

// Every entry's parameters (one argument layout for the host: GameKernelBinding).
#define TAG_KERNEL_PARAMS                                                                   \
  const TagConsts c, const TagState s, const TagBuffers b, const TagOutputs o,              \
      const long long* __restrict__ action, const bool* __restrict__ mask,                  \
      int blocks_per_game, int mode, int first_phase, int last_phase

#define TAG_RUN_KERNEL(name, kMax, kWide, kHelpers, kOptions)                               \
  extern "C" __global__ void __launch_bounds__(kHelpers ? GV_GAME_MAX_SPLIT_BLOCK           \
                                                        : GV_GAME_MAX_BLOCK)                \
      tag_run_##name(TAG_KERNEL_PARAMS) {                                                   \
    run<kMax, kWide, kHelpers, kOptions>(c, s, b, o, action, mask, blocks_per_game, mode,   \
                                         first_phase, last_phase);                          \
  }

#define TAG_STEP_KERNEL(name, kMax, kWide, kOptions)                                        \
  extern "C" __global__ void __launch_bounds__(GV_GAME_MAX_BLOCK) tag_step_##name(          \
      TAG_KERNEL_PARAMS) {                                                                  \
    step_one_block<kMax, kWide, false, false, kOptions>(c, s, b, o, action, mode);          \
  }

// tag_step_packed_<name>: a step of games of at most 16 agents, up to 32 / A games a
// 32-thread block (step_one_block's kPacked form), for the layouts small games use.
#define TAG_PACKED_STEP_KERNEL(name, kMax, kOptions)                                        \
  extern "C" __global__ void __launch_bounds__(32) tag_step_packed_##name(                  \
      TAG_KERNEL_PARAMS) {                                                                  \
    step_one_block<kMax, false, false, true, kOptions>(c, s, b, o, action, mode);           \
  }

// The backend builds only the kernel it launches: -DTAG_ONLY -DTAG_ONLY_<suffix> (the
// layout's run, step and packed entries), with -DTAG_ONLY_OPTIONS for their _options
// twins instead (-DTAG_ONLY_PLAIN as well: both, as the host emulation builds them). A
// first use compiles one of these thirty, not all. Without TAG_ONLY, all of them.
#if !defined(TAG_ONLY) || !defined(TAG_ONLY_OPTIONS) || defined(TAG_ONLY_PLAIN)
#define TAG_PLAIN(...) __VA_ARGS__
#else
#define TAG_PLAIN(...)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_OPTIONS)
#define TAG_WITH_OPTIONS(...) __VA_ARGS__
#else
#define TAG_WITH_OPTIONS(...)
#endif

// tag_run_<suffix> and tag_step_<suffix>, and their _options twins.
#define TAG_KERNELS(suffix, kMax, kWide)                                                    \
  TAG_PLAIN(TAG_RUN_KERNEL(suffix, kMax, kWide, false, false)                               \
            TAG_STEP_KERNEL(suffix, kMax, kWide, false))                                    \
  TAG_WITH_OPTIONS(TAG_RUN_KERNEL(suffix##_options, kMax, kWide, false, true)               \
                   TAG_STEP_KERNEL(suffix##_options, kMax, kWide, true))

// tag_run_<suffix> with scan helpers (no step twin), and its _options twin.
#define TAG_HELPERS_KERNELS(suffix, kMax)                                                   \
  TAG_PLAIN(TAG_RUN_KERNEL(suffix, kMax, false, true, false))                               \
  TAG_WITH_OPTIONS(TAG_RUN_KERNEL(suffix##_options, kMax, false, true, true))

// tag_step_packed_<suffix>, and its _options twin.
#define TAG_PACKED_KERNELS(suffix, kMax)                                                    \
  TAG_PLAIN(TAG_PACKED_STEP_KERNEL(suffix, kMax, false))                                    \
  TAG_WITH_OPTIONS(TAG_PACKED_STEP_KERNEL(suffix##_options, kMax, true))

#if !defined(TAG_ONLY) || defined(TAG_ONLY_full)
TAG_KERNELS(full, 0, false)
TAG_PACKED_KERNELS(full, 0)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k4)
TAG_KERNELS(k4, 4, false)
TAG_PACKED_KERNELS(k4, 4)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k8)
TAG_KERNELS(k8, 8, false)
TAG_PACKED_KERNELS(k8, 8)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k10)
TAG_KERNELS(k10, 10, false)
TAG_PACKED_KERNELS(k10, 10)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k16)
TAG_KERNELS(k16, 16, false)
TAG_PACKED_KERNELS(k16, 16)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k32)
TAG_KERNELS(k32, TAG_MAX_OBSERVED, false)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k4_wide)
TAG_KERNELS(k4_wide, 4, true)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k8_wide)
TAG_KERNELS(k8_wide, 8, true)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k10_wide)
TAG_KERNELS(k10_wide, 10, true)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k16_wide)
TAG_KERNELS(k16_wide, 16, true)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k32_wide)
TAG_KERNELS(k32_wide, TAG_MAX_OBSERVED, true)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k4_helpers)
TAG_HELPERS_KERNELS(k4_helpers, 4)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k8_helpers)
TAG_HELPERS_KERNELS(k8_helpers, 8)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k10_helpers)
TAG_HELPERS_KERNELS(k10_helpers, 10)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k16_helpers)
TAG_HELPERS_KERNELS(k16_helpers, 16)
#endif
