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
// form, tag_step_packed_*).
//
// Mirrors the torch reference operation by operation in float32; compile with -fmad=false.
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
// others' values of feature 0, then of feature 1, ...), then the time and the own role.
constexpr int kTagDiffFeatures = 5;   // Δx, Δy, Δspeed, Δacceleration, Δdirection
constexpr int kTagRoleFeature = 5;    // the other's role (1 tagger)
constexpr int kTagInGameFeature = 6;  // the other's in-game flag
constexpr int kTagFeatures = 7;       // envs/tag.py reads this one
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

// The launch's dynamic shared memory in bytes (the host sizes it: tag_shared_bytes in
// envs/tag.py).
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
//                        part p of agent a at (p * K + k) * A + a
//   stage     float[R * stage_stride]  the block's observation rows, R = min(T, A) (the
//                        threads with an agent; packed_games * A in a packed block), when
//                        the launch has room for them (staged)
// envs/tag.py's shared_bytes() computes the same sizes.
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

// The agent an observation belongs to: its state and its game's t (zeros for an idle
// thread). step_one_block has them in registers; other launches load them.
struct TagObserver {
  TagAgent own;
  int t;
};

__device__ __forceinline__ TagObserver load_observer(const TagState& s, const Agent& ag) {
  TagObserver me;
  me.own = ag.on ? load_agent(s, ag.slot) : TagAgent{0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0};
  me.t = s.t[ag.g];
  return me;
}

// normalised(), of global slot j, or of tile entry j (put_in_tile's values).
__device__ __forceinline__ void normalised(const TagConsts& c, const TagState& s, long long j,
                                           float (&n)[kTagDiffFeatures]) {
  n[0] = gv_div_positive(s.x[j], c.position_scale);
  n[1] = gv_div_positive(s.y[j], c.position_scale);
  n[2] = gv_div_positive(s.speed[j], c.speed_scale);
  n[3] = gv_div_positive(s.acceleration[j], c.speed_scale);
  n[4] = gv_div_positive(s.direction[j], c.two_pi);
}

__device__ __forceinline__ void normalised(const TagConsts& c, const TagShared& sh, int j,
                                           float (&n)[kTagDiffFeatures]) {
  const float4 place = sh.tile[j], features = sh.features[j];
  n[0] = features.x;
  n[1] = features.y;
  n[2] = features.z;
  n[3] = features.w;
  n[4] = place.w;
}

// The observer's own normalised values: with tile_ready (step_one_block) its tile entry
// (entry ag.a of the game's tiles), which put_in_tile computed from the same state;
// otherwise computed here.
__device__ __forceinline__ void own_normalised(const TagConsts& c, const TagShared& sh,
                                               const Agent& ag, const TagObserver& me,
                                               bool tile_ready, float (&n)[kTagDiffFeatures]) {
  if (tile_ready) {
    normalised(c, sh, ag.a, n);
  } else {
    normalised(c, me.own, n);
  }
}

__device__ __forceinline__ void write_tail(const TagConsts& c, const TagObserver& me,
                                           const Agent& ag, bool playing, float* row) {
  const int n = c.num_observed;
  const float time = gv_div_positive((float)me.t, c.episode_length_f);
  row[kTagFeatures * n] = playing ? time : 0.0f;
  if (c.own_role) {
    const bool shown = c.full_observation || playing;
    row[kTagFeatures * n + 1] = (shown && ag.a < c.num_taggers) ? 1.0f : 0.0f;
  }
}

__device__ void write_zeros(const TagConsts& c, float* row) {
  for (int k = 0; k < c.obs_dim; ++k) row[k] = 0.0f;
}

// Full observation: every other agent in id order, from global memory or (tile_ready:
// the tiles hold the whole game) from the tiles.
__device__ void observe_full(const TagConsts& c, const TagState& s, const TagShared& sh,
                             const Agent& ag, const TagObserver& me, bool tile_ready,
                             bool visible, float* row) {
  if (!ag.on) return;
  if (!visible) return write_zeros(c, row);
  const int n = c.num_observed;
  const bool playing = me.own.in_game != 0;
  const long long game = (long long)ag.g * c.num_agents;
  float own[kTagDiffFeatures], theirs[kTagDiffFeatures];
  own_normalised(c, sh, ag, me, tile_ready, own);
  for (int k = 0; k < n; ++k) {
    const int other = k < ag.a ? k : k + 1;
    if (tile_ready) {
      normalised(c, sh, other, theirs);
    } else {
      normalised(c, s, game + other, theirs);
    }
#pragma unroll
    for (int f = 0; f < kTagDiffFeatures; ++f) {
      row[f * n + k] = playing ? theirs[f] - own[f] : 0.0f;
    }
    row[kTagRoleFeature * n + k] = other < c.num_taggers ? 1.0f : 0.0f;
    const bool in = tile_ready ? sh.tile[other].z != 0.0f : s.in_game[game + other] != 0;
    row[kTagInGameFeature * n + k] = in ? 1.0f : 0.0f;
  }
  write_tail(c, me, ag, playing, row);
}

// Slot k of a partial observation row (K slots a feature): the other agent `other`, of
// normalised values `theirs`, as the observer (`own`) sees it; or nobody (zeros).
__device__ __forceinline__ void write_seen_slot(const TagConsts& c, float* row, int K, int k,
                                                int other,
                                                const float (&own)[kTagDiffFeatures],
                                                const float (&theirs)[kTagDiffFeatures]) {
#pragma unroll
  for (int f = 0; f < kTagDiffFeatures; ++f) row[f * K + k] = theirs[f] - own[f];
  row[kTagRoleFeature * K + k] = other < c.num_taggers ? 1.0f : 0.0f;
  row[kTagInGameFeature * K + k] = 1.0f;
}

__device__ __forceinline__ void write_empty_slot(float* row, int K, int k) {
#pragma unroll
  for (int f = 0; f < kTagFeatures; ++f) row[f * K + k] = 0.0f;
}

// With scan helpers: an agent's observation slots are written by all H threads of the
// agent, thread p * A + a the slots k = p, p + H, ... of agent a's row (the parts' lists
// are read by then). The agents first publish their K nearest in shared memory (in part
// 0's lists; +inf where the agent shows none, which writes zeros); the agent's own thread
// writes the row's tail. Every thread of the block calls it (it holds barriers).
template <int kMax>
__device__ void write_slots_split(const TagConsts& c, const TagShared& sh,
                                  const TagObserver& me, const Agent& ag, int part, int agent,
                                  bool visible, const float (&best)[kMax],
                                  const int (&chosen)[kMax], float* row) {
  const int A = c.num_agents, K = c.num_observed, parts = c.scan_helpers + 1;
  __syncthreads();  // every agent's merge has read the parts' lists
  if (part == 0) {
#pragma unroll
    for (int k = 0; k < kMax; ++k) {
      if (k >= K) break;
      sh.helped_distance[k * A + agent] = best[k];
      sh.helped_id[k * A + agent] = chosen[k];
    }
  }
  __syncthreads();
  if (part >= parts) return;
  // `row` is this thread's slot of the rows (staged or global); the agent's is part * A
  // rows before it.
  const long long stride = sh.staged ? stage_stride(c) : c.obs_dim;
  float* const agent_row = row - part * A * stride;
  float own[kTagDiffFeatures], theirs[kTagDiffFeatures];
  normalised(c, sh, agent, own);
  for (int k = part; k < K; k += parts) {
    const float d = sh.helped_distance[k * A + agent];
    if (!(d < INFINITY)) {
      write_empty_slot(agent_row, K, k);
      continue;
    }
    const int other = sh.helped_id[k * A + agent];
    normalised(c, sh, other, theirs);
    write_seen_slot(c, agent_row, K, k, other, own, theirs);
  }
  if (part != 0) return;
  if (visible) return write_tail(c, me, ag, me.own.in_game != 0, row);
  row[kTagFeatures * K] = 0.0f;
  if (c.own_role) row[kTagFeatures * K + 1] = 0.0f;
}

// Partial observation: the K nearest others still in the game, by increasing squared
// distance, lower index first on ties (as a stable sort), zero-padded. The sorted list
// lives in registers (kMax >= K slots, fully unrolled); candidates come through shared
// memory tiles of the game's positions. Every thread runs the tile loop (it holds barriers
// and warp votes). When the whole game fits one tile (A <= blockDim.x), the tile also holds
// every agent's other features, and the chosen others are read from it. tile_ready: the
// caller has already put the whole game in the tiles (step_one_block), nothing is loaded.
//
// Each thread scans the candidates in increasing id and inserts one when it beats its
// kMax-th best so far (the K-th where K = kMax; the first K slots are the same either way).
// In a warp some lane nearly always does, so the insertion is written without branches
// (one compare and predicated selects a slot; a lane whose candidate does not beat its
// kMax-th best inserts with `in` false, which changes nothing) and runs for the whole warp
// whenever any lane needs it: one warp-uniform branch per candidate instead of divergent
// ones per slot.
// kWide: scan four candidates at a time (for launches of few blocks, where the scan's
// latency is the limit); otherwise one at a time (fewer registers, more blocks per SM).
//
// Scan helpers (c.scan_helpers = H - 1 > 0, with tile_ready: step_one_block launched with
// at least H * A threads, for launches too small to fill the GPU, where each thread's
// serial scan is the step's latency): agent a's candidates are split in H parts of `split`
// ids; thread p * A + a (p = 0: the agent's own thread; p > 0: a helper, otherwise an idle
// thread) scans part p, ids [p * split, (p + 1) * split). Every part runs `split`
// iterations (ids from A up to H * split - 1 are tile entries that step_one_block marks out
// of the game), so the warp votes stay uniform in a warp of several parts. A helper reads
// its agent's x, y and in-game flag from the tile. Each part leaves its sorted list in
// shared memory; the agent merges the H lists, taking at each of its K slots the smallest
// head, the lower part first on equal distances. Each list is in (distance, id) order and
// every id of part p exceeds every id of part p - 1, so the merge is the serial scan's list,
// ties included. A helper does not know whether its agent's slot shows an observation
// (that needs the agent's flags of the step): the agent ignores the lists when it does not.
template <int kMax, bool kWide, bool kHelpers = false>
__device__ void observe_partial(const TagConsts& c, const TagState& s, const Agent& ag,
                                const TagObserver& me, const TagShared& sh, bool tile_ready,
                                bool visible, float* row) {
  float best[kMax];
  int chosen[kMax];
#pragma unroll
  for (int k = 0; k < kMax; ++k) {
    best[k] = INFINITY;
    chosen[k] = 0;
  }
  const int K = c.num_observed;
  const bool playing = ag.on && me.own.in_game != 0;
  const long long game = (long long)ag.g * c.num_agents;
  const bool one_tile = tile_ready || c.num_agents <= (int)blockDim.x;
  const bool split = kHelpers && tile_ready && c.scan_helpers;
  // Under split, thread part * A + agent scans part `part` of agent `agent`'s candidates.
  const int part = split ? (int)threadIdx.x / c.num_agents : 0;
  const int agent = split ? (int)threadIdx.x - part * c.num_agents : ag.a;
  const bool helper = part >= 1 && part <= c.scan_helpers;
  // A helper's first candidate, its agent's position, and whether the agent is in the game
  // (the helper's list is wasted where the agent wants no observation after all).
  const int first = helper ? part * c.scan_split : 0;
  float x = me.own.x, y = me.own.y;
  bool want = visible && playing;
  if (helper) {
    const float4 place = sh.tile[agent];
    x = place.x;
    y = place.y;
    want = place.z != 0.0f;
  }
  // The kMax-th best so far: a looser bar than the K-th where K < kMax (more candidates are
  // inserted), with the same first K entries; best[K - 1] would be an index the compiler
  // turns into a load, which keeps best[] in local memory.
  float worst = INFINITY;
  // Inserts (d2, id) into the sorted list where `in`, keeping the first of equal distances
  // first (candidates come in increasing id). The list is sorted, so d2 beating slot p - 1
  // means it beats slot p too: slot p changes exactly where d2 beats it (one compare a
  // slot, each made once).
  auto insert = [&](float d2, int id, bool in) {
    bool beats[kMax];  // d2 < best[p], on the list before the insertion
#pragma unroll
    for (int p = 0; p < kMax; ++p) beats[p] = in && d2 < best[p];
#pragma unroll
    for (int p = kMax - 1; p > 0; --p) {
      if (beats[p]) {
        best[p] = beats[p - 1] ? best[p - 1] : d2;
        chosen[p] = beats[p - 1] ? chosen[p - 1] : id;
      }
    }
    if (beats[0]) {
      best[0] = d2;
      chosen[0] = id;
    }
    worst = best[kMax - 1];
  };
  for (int start = 0; start < c.num_agents; start += blockDim.x) {
    if (!tile_ready) {
      __syncthreads();
      const int k = start + threadIdx.x;
      if (k < c.num_agents && one_tile) {
        put_in_tile(c, sh, threadIdx.x, load_agent(s, game + k));
      } else if (k < c.num_agents) {
        sh.tile[threadIdx.x] = make_float4(s.x[game + k], s.y[game + k],
                                           s.in_game[game + k] != 0 ? 1.0f : 0.0f, 0.0f);
      }
      __syncthreads();
    }
    const int count = split ? c.scan_split : min((int)blockDim.x, c.num_agents - start);
    const int self = agent - start - first;
    // Whether this thread's candidate j (tile entry first + j) beats the kMax-th best (not
    // oneself, not an agent out of the game, and nobody when this thread wants no
    // observation), its squared distance in d2.
    auto beats_worst = [&](int j, float& d2) {
      const float4 other = sh.tile[first + j];
      const float dx = other.x - x;
      const float dy = other.y - y;
      d2 = dx * dx + dy * dy;
      return want && other.z != 0.0f && j != self && d2 < worst;
    };
    // The same as a squared distance, +inf where it does not beat the kMax-th best.
    auto candidate = [&](int j) {
      float d2;
      return beats_worst(j, d2) ? d2 : INFINITY;
    };
    const int id = start + first;  // of candidate j: id + j
    int j = 0;
    // Four candidates at a time: independent loads and arithmetic hide the latency.
    for (; kWide && j + 4 <= count; j += 4) {
      const float d0 = candidate(j), d1 = candidate(j + 1);
      const float d2 = candidate(j + 2), d3 = candidate(j + 3);
      if (!__any_sync(0xffffffffu, fminf(fminf(d0, d1), fminf(d2, d3)) < INFINITY)) continue;
#pragma unroll 1
      for (int q = 0; q < 4; ++q) {  // one copy of the insertion code
        const float d = q == 0 ? d0 : (q == 1 ? d1 : (q == 2 ? d2 : d3));
        // worst may have dropped since d was checked against it
        if (__any_sync(0xffffffffu, d < worst)) insert(d, id + j + q, d < worst);
      }
    }
#pragma unroll 1
    for (; j < count; ++j) {
      float d2;
      const bool in = beats_worst(j, d2);
      if (__any_sync(0xffffffffu, in)) insert(d2, id + j, in);
    }
  }
  if (split) {
    // Every part's list into shared memory; the agent merges them (lower ids first).
    const int A = c.num_agents, parts = c.scan_helpers + 1;
    if (part < parts) {
#pragma unroll
      for (int k = 0; k < kMax; ++k) {
        if (k >= K) break;
        sh.helped_distance[(part * K + k) * A + agent] = best[k];
        sh.helped_id[(part * K + k) * A + agent] = chosen[k];
      }
    }
    __syncthreads();
    if (want && ag.on) {
      // Without branches: the lanes of a warp take from different parts, and divergent
      // paths would each wait for their own shared load. Every slot reads each part's
      // smallest entry not taken yet (before slot k at most k < K of a part are taken, so
      // the index stays in its list); byte p of `taken` counts part p's entries taken.
      static_assert(TAG_SCAN_MAX_PARTS == 4, "a two-level tournament of four parts");
      unsigned taken = 0;
      int first_at[TAG_SCAN_MAX_PARTS];  // the index of part p's first entry
#pragma unroll
      for (int p = 0; p < TAG_SCAN_MAX_PARTS; ++p) first_at[p] = p * K * A + agent;
#pragma unroll
      for (int k = 0; k < kMax; ++k) {
        if (k >= K) break;
        float head[TAG_SCAN_MAX_PARTS];
        int at[TAG_SCAN_MAX_PARTS];  // the head's index in the lists
#pragma unroll
        for (int p = 0; p < TAG_SCAN_MAX_PARTS; ++p) {
          at[p] = first_at[p] + (int)__byte_perm(taken, 0, 0x4440 + p) * A;
          head[p] = p < parts ? sh.helped_distance[at[p]] : INFINITY;
        }
        // The smallest head, the lower part on equal distances (strict compares, the lower
        // part on the left of each pair).
        const bool right01 = head[1] < head[0], right23 = head[3] < head[2];
        const float d01 = right01 ? head[1] : head[0], d23 = right23 ? head[3] : head[2];
        const int at01 = right01 ? at[1] : at[0], at23 = right23 ? at[3] : at[2];
        const unsigned one01 = right01 ? 0x100u : 0x1u, one23 = right23 ? 0x1000000u : 0x10000u;
        const bool right = d23 < d01;
        best[k] = right ? d23 : d01;
        chosen[k] = sh.helped_id[right ? at23 : at01];
        taken += right ? one23 : one01;
      }
    }
  }
  if (split) return write_slots_split(c, sh, me, ag, part, agent, visible, best, chosen, row);
  if (!ag.on) return;
  if (!visible) return write_zeros(c, row);
  float own[kTagDiffFeatures], theirs[kTagDiffFeatures];
  own_normalised(c, sh, ag, me, tile_ready, own);
#pragma unroll
  for (int k = 0; k < kMax; ++k) {
    if (k >= K) break;
    const bool seen = playing && best[k] < INFINITY;
    if (!seen) {
      write_empty_slot(row, K, k);
      continue;
    }
    if (one_tile) {
      normalised(c, sh, chosen[k], theirs);
    } else {
      normalised(c, s, game + chosen[k], theirs);
    }
    write_seen_slot(c, row, K, k, chosen[k], own, theirs);
  }
  write_tail(c, me, ag, playing, row);
}

// Writes the observation row of one agent (zeros where the slot shows none). Every
// thread of the block must call it (the partial mode's tiles and the staging hold
// barriers). kMax = 0: full observations; else partial ones with K <= kMax. me: the
// observing agent; tile_ready: see observe_partial.
//
// When the launch has room (TagShared::staged), each thread writes its row to shared
// memory and the block then copies its rows out together: they are consecutive slots, so
// the block's part of `out` is one contiguous span, written with consecutive threads on
// consecutive words. Otherwise each thread writes its row straight to global memory (a
// stride of obs_dim floats between the threads of a warp: 32 sectors per store).
// kPacked (step_one_block's packed form): the block holds packed_games_here(c) games, the
// agent's game's tiles start at entry lane0 (the game's first thread), and the block's
// rows, those of all its games, are one span too.
template <int kMax, bool kWide, bool kHelpers = false, bool kPacked = false>
__device__ void write_observation(const TagConsts& c, const TagState& s, const Agent& ag,
                                  const TagObserver& me, bool tile_ready, bool visible,
                                  float* out, int lane0 = 0) {
  const TagShared sh = kPacked ? game_shared(tag_shared(c, true), lane0) : tag_shared(c);
  const int D = c.obs_dim, S = stage_stride(c);
  float* row = sh.staged ? sh.stage + threadIdx.x * S : out + ag.slot * (long long)D;
  if constexpr (kMax == 0) {
    observe_full(c, s, sh, ag, me, tile_ready, visible, row);
  } else {
    observe_partial<kMax, kWide, kHelpers>(c, s, ag, me, sh, tile_ready, visible, row);
  }
  if (!sh.staged) return;
  __syncthreads();
  // The block's first agent of the game, and its rows.
  const int first = ag.a - (int)threadIdx.x;
  const int rows = kPacked ? packed_games_here(c) * c.num_agents
                           : min((int)blockDim.x, c.num_agents - first);
  float* span = out + ((long long)ag.g * c.num_agents + first) * D;
  const int total = rows * D;
  // Word e of the span is feature e % D of row e / D; both advance by blockDim.x per pass.
  // Four passes at a time: their shared loads are independent, so they overlap.
  const int step_rows = blockDim.x / D, step_features = blockDim.x % D;
  int r = threadIdx.x / D, f = threadIdx.x % D;
  auto next_word = [&]() {  // the staged index of word e, then e += blockDim.x
    const int index = r * S + f;
    r += step_rows;
    f += step_features;
    if (f >= D) {
      f -= D;
      r += 1;
    }
    return index;
  };
  constexpr int kPasses = 4;
  const int T = blockDim.x;
  int e = threadIdx.x;
  for (; e + (kPasses - 1) * T < total; e += kPasses * T) {
    int index[kPasses];
    float value[kPasses];
#pragma unroll
    for (int q = 0; q < kPasses; ++q) index[q] = next_word();
#pragma unroll
    for (int q = 0; q < kPasses; ++q) value[q] = sh.stage[index[q]];
#pragma unroll
    for (int q = 0; q < kPasses; ++q) span[e + q * T] = value[q];
  }
  for (; e < total; e += T) span[e] = sh.stage[next_word()];
}

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
template <int kMax, bool kWide, bool kHelpers = false, bool kPacked = false>
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
    write_observation<kMax, kWide, kHelpers, kPacked>(c, s, ag, TagObserver{me, t}, true,
                                                      visible, final_obs ? o.final_obs : o.obs,
                                                      lane0);
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

template <int kMax, bool kWide, bool kHelpers = false>
__device__ void run(const TagConsts& c, const TagState& s, const TagBuffers& b,
                    const TagOutputs& o, const long long* __restrict__ action,
                    const bool* __restrict__ mask, int blocks_per_game, int mode,
                    int first_phase, int last_phase) {
  if (blocks_per_game == 1 && first_phase == kValidate && last_phase == kObserveStep) {
    return step_one_block<kMax, kWide, kHelpers>(c, s, b, o, action, mode);
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
        if (same_step) write_observation<kMax, kWide>(c, s, ag, load_observer(s, ag), false,
                                        ag.on && b.visible[ag.slot], o.final_obs);
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
        write_observation<kMax, kWide>(c, s, ag, load_observer(s, ag), false,
                                        ag.on && b.visible[ag.slot], o.obs);
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
        write_observation<kMax, kWide>(c, s, ag, load_observer(s, ag), false,
                                        ag.on && b.visible[ag.slot], o.obs);
        break;
    }
  }
}

// One kernel per observation layout, so each keeps only the registers it needs:
// tag_run_full, tag_run_k<kMax> for partial observations of K <= kMax others,
// tag_run_k<kMax>_wide with the four-at-a-time scan (for a few very large games), and
// tag_run_k<kMax>_helpers with scan helpers (launches of at most one block per SM; kept
// apart so that the other kernels carry none of their code or registers). Each but the
// helpers' has a tag_step_<suffix> twin: step_one_block as its own entry, which envs/tag.py
// launches for games of more than 32 agents (H200: 2,000×105 103 µs a step against 114
// through run(), where ptxas spills 16 bytes instead of 56; 1×5, 2,000×5 and 100×105 were
// 0.1-0.35 µs slower with it, so they keep run()). The layouts small games use also have
// tag_step_packed_<suffix> (TAG_PACKED_KERNEL), for steps of several games a warp.

// Every entry's parameters (one argument layout for the host: GameKernelBinding).
#define TAG_KERNEL_PARAMS                                                                   \
  const TagConsts c, const TagState s, const TagBuffers b, const TagOutputs o,              \
      const long long* __restrict__ action, const bool* __restrict__ mask,                  \
      int blocks_per_game, int mode, int first_phase, int last_phase

#define TAG_KERNEL(suffix, kMax, kWide, kHelpers)                                           \
  extern "C" __global__ void __launch_bounds__(kHelpers ? GV_GAME_MAX_SPLIT_BLOCK           \
                                                        : GV_GAME_MAX_BLOCK)                \
      tag_run_##suffix(TAG_KERNEL_PARAMS) {                                                 \
    run<kMax, kWide, kHelpers>(c, s, b, o, action, mask, blocks_per_game, mode,             \
                               first_phase, last_phase);                                    \
  }

#define TAG_KERNELS(suffix, kMax, kWide)                                                    \
  TAG_KERNEL(suffix, kMax, kWide, false)                                                    \
  extern "C" __global__ void __launch_bounds__(GV_GAME_MAX_BLOCK) tag_step_##suffix(        \
      TAG_KERNEL_PARAMS) {                                                                  \
    step_one_block<kMax, kWide>(c, s, b, o, action, mode);                                  \
  }

// tag_step_packed_<suffix>: a step of games of at most 16 agents, up to 32 / A games a
// 32-thread block (step_one_block's kPacked form), for the layouts small games use.
#define TAG_PACKED_KERNEL(suffix, kMax)                                                     \
  extern "C" __global__ void __launch_bounds__(32) tag_step_packed_##suffix(                \
      TAG_KERNEL_PARAMS) {                                                                  \
    step_one_block<kMax, false, false, true>(c, s, b, o, action, mode);                     \
  }

// The backend builds only the kernel it launches (-DTAG_ONLY -DTAG_ONLY_<suffix>): a first
// use compiles one of these fifteen, not all. Without TAG_ONLY, all of them.
#if !defined(TAG_ONLY) || defined(TAG_ONLY_full)
TAG_KERNELS(full, 0, false)
TAG_PACKED_KERNEL(full, 0)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k4)
TAG_KERNELS(k4, 4, false)
TAG_PACKED_KERNEL(k4, 4)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k8)
TAG_KERNELS(k8, 8, false)
TAG_PACKED_KERNEL(k8, 8)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k10)
TAG_KERNELS(k10, 10, false)
TAG_PACKED_KERNEL(k10, 10)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k16)
TAG_KERNELS(k16, 16, false)
TAG_PACKED_KERNEL(k16, 16)
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
TAG_KERNEL(k4_helpers, 4, false, true)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k8_helpers)
TAG_KERNEL(k8_helpers, 8, false, true)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k10_helpers)
TAG_KERNEL(k10_helpers, 10, false, true)
#endif
#if !defined(TAG_ONLY) || defined(TAG_ONLY_k16_helpers)
TAG_KERNEL(k16_helpers, 16, false, true)
#endif
