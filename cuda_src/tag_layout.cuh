// Continuous Tag's data layout, shared by the kernels of tag.cu and the observation writers
// of tag_observe.cuh: the layout constants (read by envs/tag.py and envs/tag_launch.py), the
// constants of envs/tag.py's kernel binding, the state, buffer and output structs, the
// block's dynamic shared memory, and one agent's fields in registers.
//
// An include guard, not #pragma once: the host emulation of the kernels
// (tests/host_kernels/test_tag_one_block_host.py) includes a patched copy of this file from
// another folder, which the guard keeps from being defined twice.
#ifndef GV_TAG_LAYOUT_CUH
#define GV_TAG_LAYOUT_CUH

#include "common/games.cuh"
#include "common/math.cuh"
#include "common/rng.cuh"

#define TAG_MAX_OBSERVED 32  // the largest K (num_other_agents_observed) a kernel keeps

// The largest kMax with a scan-helpers kernel (tag_run_k<kMax>_helpers, observe_partial):
// a k32 one spilled 270 more bytes (measured when the helpers' lists were merged by a
// second copy of the insertion code).
#define TAG_SCAN_HELPERS_MAX_OBSERVED 16
// The most threads per agent in the scan (the agent's own and scan_helpers helpers).
#define TAG_SCAN_MAX_PARTS 4

// An observation holds, per observed other agent, these features (feature-major: all
// others' values of feature 0, then of feature 1, ...), then the time, the own state
// (observe_own_state) and the own role (observe_own_role).
constexpr int kTagDiffFeatures = 5;   // Δx, Δy, Δspeed, Δacceleration, Δdirection
constexpr int kTagRoleFeature = 5;    // the other's role (1 tagger)
constexpr int kTagInGameFeature = 6;  // the other's in-game flag
constexpr int kTagFeatures = 7;       // envs/tag.py reads this one
// observe_own_state: x/L, y/L, cos and sin of the direction, speed/max_speed (envs/tag.py
// reads it)
constexpr int kTagOwnStateFeatures = 5;
static_assert(kTagRoleFeature == kTagDiffFeatures && kTagInGameFeature == kTagRoleFeature + 1 &&
              kTagFeatures == kTagInGameFeature + 1, "the feature layout");

// The constants of envs/tag.py's kernel binding, in order (checked at load).
#define TAG_CONSTS(FIELD)                                                                  \
  FIELD(int, num_agents)                                                                   \
  FIELD(int, num_taggers)                                                                  \
  FIELD(int, episode_length)                                                               \
  FIELD(int, num_acceleration_actions) /* levels + 1 */                                    \
  FIELD(int, num_turn_actions)                                                             \
  FIELD(int, full_observation)                                                             \
  FIELD(int, own_role)                                                                     \
  FIELD(int, own_state) /* observe_own_state */                                            \
  FIELD(int, egocentric)                                                                   \
  FIELD(int, num_observed) /* A - 1 (full) or K (partial) */                               \
  FIELD(int, exits) /* runner_exits_game_after_tagged */                                   \
  FIELD(int, fixed_start)                                                                  \
  FIELD(int, obs_dim)                                                                      \
  FIELD(float, grid_length)                                                                \
  FIELD(float, vmax_tagger)                                                                \
  FIELD(float, vmax_runner)                                                                \
  FIELD(float, tag_threshold)                                                              \
  FIELD(float, position_scale)                                                             \
  FIELD(float, speed_scale)                                                                \
  FIELD(float, two_pi)                                                                     \
  FIELD(float, half_pi)                                                                    \
  FIELD(float, edge_hit_penalty)                                                           \
  FIELD(float, step_tagger)                                                                \
  FIELD(float, step_runner)                                                                \
  FIELD(float, tag_reward)                                                                 \
  FIELD(float, tag_penalty)                                                                \
  FIELD(float, end_reward)                                                                 \
  FIELD(float, episode_length_f)                                                           \
  FIELD(int, scan_helpers) /* H - 1: threads p * A + a, 0 < p < H, help agent a scan */  \
  FIELD(int, scan_split) /* ceil(A / H): part p of a's scan takes [p * split, +split) */  \
  FIELD(int, num_games) /* G (read by the packed step only) */                            \
  FIELD(int, packed_games) /* games a block of the packed step (<= 32 / A), else 1 */

GV_GAME_CONSTS(TagConsts, tag, TAG_CONSTS)

// (G, A) agent fields and (G,) game fields of gpu_vecenv.multi_agent's buffers.
struct TagState {
  float* x;
  float* y;
  float* speed;
  float* direction;
  float* acceleration;
  int* in_game;
  int* t;
};

struct TagBuffers {
  const long long* seed;      // (G,)
  long long* rng_counter;     // (G,)
  bool* pending;              // (G,)
  bool* invalid_action;       // (G*A,)
  int* error_count;           // ()
  int* game_bad;              // (G,) scratch, zero between steps
  int* runners_left;          // (G,) scratch
  int* game_ended;            // (G,) scratch
  int* tag_count;             // (G, T) scratch
  bool* visible;              // (G*A,) scratch: which slots show an observation
  const float* acceleration_table;
  const float* turn_table;
};

struct TagOutputs {
  float* obs;                 // (G*A, obs_dim)
  float* reward;              // (G*A,)
  bool* terminated;
  bool* truncated;
  float* final_obs;           // null unless SAME_STEP
  bool* active;               // (G*A,) the slot's observation is live after this step
};

// The launch's dynamic shared memory in bytes (the host sizes it: shared_bytes in
// envs/tag_launch.py).
__device__ __forceinline__ unsigned dynamic_shared_bytes() {
  unsigned bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return bytes;
}

// Row stride of the staged observation rows, in floats: obs_dim made odd, so the threads
// of a warp writing the same feature of their rows hit 32 different banks.
__device__ __forceinline__ int stage_stride(const TagConsts& c) { return c.obs_dim | 1; }

// The block's dynamic shared memory, T = blockDim.x entries per array:
//   tile      float4[T]  x, y, in-game flag (and, with features, the normalised direction)
//                        of a tile of the game's agents (float2 for the tag search's taggers)
//   features  float4[T]  normalised x, y, speed, acceleration (put_in_tile: when the whole
//                        game is one tile)
//   tag_count int[T]     tags per tagger this step (step_one_block: the game's counters)
//   helped    float[H * K * A], int[H * K * A]  with scan_helpers only (H = scan_helpers
//                        + 1): each part's K nearest (squared distance, id), entry k of
//                        part p of agent a at (p * K + k) * A + a (once merged, part 1's
//                        first entries hold the egocentric cosine and sine: see
//                        write_slots_split)
//   stage     float[R * stage_stride]  the block's observation rows, R = min(T, A) (the
//                        threads with an agent; packed_games * A in a packed block), when
//                        the launch has room for them (staged)
// envs/tag_launch.py's shared_bytes() computes the same sizes.
struct TagShared {
  float4* tile;
  float4* features;
  int* tag_count;
  float* helped_distance;
  int* helped_id;
  float* stage;
  bool staged;
};

__device__ __forceinline__ TagShared tag_shared(const TagConsts& c, bool packed = false) {
  extern __shared__ float4 tag_dynamic_shared[];
  const unsigned T = blockDim.x;
  const unsigned helped =
      c.scan_helpers ? (unsigned)((c.scan_helpers + 1) * c.num_observed * c.num_agents) : 0u;
  TagShared sh;
  sh.tile = tag_dynamic_shared;
  sh.features = tag_dynamic_shared + T;
  sh.tag_count = reinterpret_cast<int*>(tag_dynamic_shared + 2 * T);
  sh.helped_distance = reinterpret_cast<float*>(sh.tag_count + T);
  sh.helped_id = reinterpret_cast<int*>(sh.helped_distance + helped);
  sh.stage = reinterpret_cast<float*>(sh.helped_id + helped);
  const unsigned base = T * (2 * sizeof(float4) + sizeof(int)) + helped * 2 * sizeof(float);
  // The block's agents: a game's (or its part's), or those of a packed block's games.
  const unsigned rows = packed ? (unsigned)(c.packed_games * c.num_agents)
                               : (unsigned)min((int)T, c.num_agents);
  sh.staged = dynamic_shared_bytes() >= base + rows * (unsigned)stage_stride(c) * sizeof(float);
  return sh;
}

// Packed blocks (step_one_block<..., kPacked>, one warp each): games of A <= 16 agents,
// c.packed_games (at most 32 / A) of them a block, game q of the block on threads
// [q * A, (q + 1) * A); the last block holds the games left.
__device__ __forceinline__ int packed_games_here(const TagConsts& c) {
  return min(c.packed_games, c.num_games - (int)blockIdx.x * c.packed_games);
}

// The shared memory of the packed block's game whose first thread is lane0: its tiles and
// tag counters start at entry lane0 (entry a: its agent a); the staged rows stay the
// block's (row threadIdx.x).
__device__ __forceinline__ TagShared game_shared(TagShared sh, int lane0) {
  sh.tile += lane0;
  sh.features += lane0;
  sh.tag_count += lane0;
  return sh;
}

// One agent's fields of TagState, in registers.
struct TagAgent {
  float x, y, speed, direction, acceleration;
  int in_game;
};

__device__ __forceinline__ TagAgent load_agent(const TagState& s, long long i) {
  return TagAgent{s.x[i], s.y[i], s.speed[i], s.direction[i], s.acceleration[i], s.in_game[i]};
}

__device__ __forceinline__ void store_agent(const TagState& s, long long i, const TagAgent& v) {
  s.x[i] = v.x;
  s.y[i] = v.y;
  s.speed[i] = v.speed;
  s.direction[i] = v.direction;
  s.acceleration[i] = v.acceleration;
  s.in_game[i] = v.in_game;
}

// The five normalised values whose differences an observation holds, of agent v.
__device__ __forceinline__ void normalised(const TagConsts& c, const TagAgent& v,
                                           float (&n)[kTagDiffFeatures]) {
  n[0] = gv_div_positive(v.x, c.position_scale);
  n[1] = gv_div_positive(v.y, c.position_scale);
  n[2] = gv_div_positive(v.speed, c.speed_scale);
  n[3] = gv_div_positive(v.acceleration, c.speed_scale);
  n[4] = gv_div_positive(v.direction, c.two_pi);
}

// Tile entry k = agent v: what the tag search and the observations read of the others,
// its values normalised once here rather than by each agent that observes it.
__device__ __forceinline__ void put_in_tile(const TagConsts& c, const TagShared& sh, int k,
                                            const TagAgent& v) {
  float n[kTagDiffFeatures];
  normalised(c, v, n);
  sh.tile[k] = make_float4(v.x, v.y, v.in_game != 0 ? 1.0f : 0.0f, n[4]);
  sh.features[k] = make_float4(n[0], n[1], n[2], n[3]);
}

#endif  // GV_TAG_LAYOUT_CUH
