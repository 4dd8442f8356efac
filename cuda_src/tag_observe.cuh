// Continuous Tag's observation writers (envs/tag.py's observe, docs/tag_rules.md): full
// observations (every other agent in id order), partial ones (the K nearest others, with
// or without scan helpers), and write_observation, which every kernel of tag.cu calls to
// write a thread's row, staged through shared memory where the launch has room.
//
// kOptions: the writers of the kernels with the options (tag.cu's *_options), which write
// what c.own_state (observe_own_state) and c.egocentric ask for; the other kernels hold none
// of that code, so their registers and instructions stay those of the observation without
// the options.
#ifndef GV_TAG_OBSERVE_CUH
#define GV_TAG_OBSERVE_CUH

#include "tag_layout.cuh"

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

// The row's tail but the own state (write_options): the time and the own role.
template <bool kOptions>
__device__ __forceinline__ void write_tail(const TagConsts& c, const TagObserver& me,
                                           const Agent& ag, bool playing, float* row) {
  const int n = c.num_observed;
  const float time = gv_div_positive((float)me.t, c.episode_length_f);
  row[kTagFeatures * n] = playing ? time : 0.0f;
  if (c.own_role) {
    const bool shown = c.full_observation || playing;
    const int own_state = kOptions && c.own_state ? kTagOwnStateFeatures : 0;
    row[kTagFeatures * n + 1 + own_state] = (shown && ag.a < c.num_taggers) ? 1.0f : 0.0f;
  }
}

// The observer's state as it is now, for the options' features, read back from its slot:
// every launch has stored it there before its observations (step_one_block, which holds
// it in registers, too, but for a game with an invalid action, where it is unchanged), and
// reading it back costs the options kernels a few loads where holding the direction and
// speed in registers through the K-nearest scan would cost them registers.
__device__ __forceinline__ TagAgent observer_now(const TagState& s, const Agent& ag) {
  return load_agent(s, ag.slot);
}

// torch.cos / torch.sin of a CUDA float32 tensor (::cos / ::sin of a float: cosf / sinf,
// libdevice's non-ftz; the kernels are built without fast math).
__device__ __forceinline__ float torch_cos(float x) { return cosf(x); }
__device__ __forceinline__ float torch_sin(float x) { return sinf(x); }

// egocentric: slots k = first, first + every, ... of a row (n slots a feature), their Δx
// and Δy turned into the observer's frame (x ahead, y to its left) as envs/tag.py's observe
// turns them: cos·Δx + sin·Δy and cos·Δy − sin·Δx, each product rounded, then the sum (no
// FMA). Full observations turn every slot (also the zero Δs of an observer out of the game,
// as the reference does: a zero may come out negative); partial ones the slots that show
// somebody (in-game flag 1), the others staying zeros. The thread wrote the slots itself.
__device__ __forceinline__ void turn_slots(const TagConsts& c, float* row, int first, int every,
                                           float cos_dir, float sin_dir) {
  const int n = c.num_observed;
  for (int k = first; k < n; k += every) {
    if (!c.full_observation && row[kTagInGameFeature * n + k] == 0.0f) continue;
    const float dx = row[k], dy = row[n + k];
    row[k] = __fadd_rn(__fmul_rn(cos_dir, dx), __fmul_rn(sin_dir, dy));
    row[n + k] = __fsub_rn(__fmul_rn(cos_dir, dy), __fmul_rn(sin_dir, dx));
  }
}

// observe_own_state: the observer's x/L, y/L, cos and sin of its direction (cos_dir,
// sin_dir) and speed/max_speed, after the time; zeros out of the game.
__device__ __forceinline__ void write_own_state(const TagConsts& c, const TagAgent& now,
                                                float cos_dir, float sin_dir, bool playing,
                                                float* row) {
  float* const own = row + kTagFeatures * c.num_observed + 1;
  own[0] = playing ? gv_div_positive(now.x, c.grid_length) : 0.0f;
  own[1] = playing ? gv_div_positive(now.y, c.grid_length) : 0.0f;
  own[2] = playing ? cos_dir : 0.0f;
  own[3] = playing ? sin_dir : 0.0f;
  own[4] = playing ? gv_div_positive(now.speed, c.speed_scale) : 0.0f;
}

// What the options ask of a row whose slots and tail this thread wrote (kOptions only).
__device__ __forceinline__ void write_options(const TagConsts& c, const TagState& s,
                                              const Agent& ag, bool playing, float* row) {
  if (!c.egocentric && !c.own_state) return;
  const TagAgent now = observer_now(s, ag);
  const float cos_dir = torch_cos(now.direction), sin_dir = torch_sin(now.direction);
  if (c.egocentric) turn_slots(c, row, 0, 1, cos_dir, sin_dir);
  if (c.own_state) write_own_state(c, now, cos_dir, sin_dir, playing, row);
}

__device__ void write_zeros(const TagConsts& c, float* row) {
  for (int k = 0; k < c.obs_dim; ++k) row[k] = 0.0f;
}

// Full observation: every other agent in id order, from global memory or (tile_ready:
// the tiles hold the whole game) from the tiles.
template <bool kOptions>
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
  write_tail<kOptions>(c, me, ag, playing, row);
  if constexpr (kOptions) write_options(c, s, ag, playing, row);
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
// 0's lists; +inf where the agent shows none, which writes zeros) and, egocentric, the
// cosine and sine of their direction (in part 1's lists, read by then: a helper has not
// its agent's direction); the agent's own thread writes the row's tail. Every thread of
// the block calls it (it holds barriers).
template <int kMax, bool kOptions>
__device__ void write_slots_split(const TagConsts& c, const TagState& s, const TagShared& sh,
                                  const TagObserver& me, const Agent& ag, int part, int agent,
                                  bool visible, const float (&best)[kMax],
                                  const int (&chosen)[kMax], float* row) {
  const int A = c.num_agents, K = c.num_observed, parts = c.scan_helpers + 1;
  // egocentric: entry a of each, agent a's (part 1's first entries: there are H >= 2 parts)
  float* const cos_of = sh.helped_distance + K * A;
  float* const sin_of = reinterpret_cast<float*>(sh.helped_id + K * A);
  __syncthreads();  // every agent's merge has read the parts' lists
  if (part == 0) {
#pragma unroll
    for (int k = 0; k < kMax; ++k) {
      if (k >= K) break;
      sh.helped_distance[k * A + agent] = best[k];
      sh.helped_id[k * A + agent] = chosen[k];
    }
    if (kOptions && c.egocentric) {
      const float direction = observer_now(s, ag).direction;
      cos_of[agent] = torch_cos(direction);
      sin_of[agent] = torch_sin(direction);
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
  if constexpr (kOptions) {
    if (c.egocentric) turn_slots(c, agent_row, part, parts, cos_of[agent], sin_of[agent]);
  }
  if (part != 0) return;
  if constexpr (kOptions) {
    if (!visible) {
      for (int f = kTagFeatures * K; f < c.obs_dim; ++f) row[f] = 0.0f;  // the whole tail
      return;
    }
    const bool playing = me.own.in_game != 0;
    write_tail<kOptions>(c, me, ag, playing, row);
    if (c.own_state) {
      const TagAgent now = observer_now(s, ag);
      write_own_state(c, now, torch_cos(now.direction), torch_sin(now.direction), playing,
                      row);
    }
    return;
  }
  if (visible) return write_tail<kOptions>(c, me, ag, me.own.in_game != 0, row);
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
template <int kMax, bool kWide, bool kHelpers, bool kOptions>
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
  if (split) {
    return write_slots_split<kMax, kOptions>(c, s, sh, me, ag, part, agent, visible, best,
                                             chosen, row);
  }
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
  write_tail<kOptions>(c, me, ag, playing, row);
  if constexpr (kOptions) write_options(c, s, ag, playing, row);
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
// rows, those of all its games, are one span too. kOptions: see the top of this file.
template <int kMax, bool kWide, bool kHelpers, bool kPacked, bool kOptions>
__device__ void write_observation(const TagConsts& c, const TagState& s, const Agent& ag,
                                  const TagObserver& me, bool tile_ready, bool visible,
                                  float* out, int lane0 = 0) {
  const TagShared sh = kPacked ? game_shared(tag_shared(c, true), lane0) : tag_shared(c);
  const int D = c.obs_dim, S = stage_stride(c);
  float* row = sh.staged ? sh.stage + threadIdx.x * S : out + ag.slot * (long long)D;
  if constexpr (kMax == 0) {
    observe_full<kOptions>(c, s, sh, ag, me, tile_ready, visible, row);
  } else {
    observe_partial<kMax, kWide, kHelpers, kOptions>(c, s, ag, me, sh, tile_ready, visible,
                                                     row);
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

#endif  // GV_TAG_OBSERVE_CUH
