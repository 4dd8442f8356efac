// Gridworld Tag (envs/tag_grid.py, TAG_RULES.md): G games of A agents (the last one the
// runner), one thread per agent, blocks_per_game = ceil(A / blockDim.x) blocks per game.
// The same phase structure as tag.cu (see there): V validate, M move (or NEXT_STEP
// reset), T taggers on the runner's cell count into an integer per game, F rewards and
// flags, OF / R (SAME_STEP) final_obs and reset, O observations and the game's
// bookkeeping. One launch runs all phases when a game fits one block. Compile with
// -fmad=false.
#include "common/math.cuh"
#include "common/rng.cuh"

enum GridPhase {
  kValidate = 0, kMove, kTag, kFinish, kFinalObs, kSameStepReset, kObserveStep,
  kResetAgents, kResetGames, kObserveOnly
};

#define GV_AUTORESET_NEXT_STEP 0
#define GV_AUTORESET_SAME_STEP 1
#define GV_AUTORESET_DISABLED 2

struct GridConsts {
  int num_agents;
  int grid_length;
  int episode_length;
  int full_observation;
  int random_start;
  int obs_dim;
  float neg_wall_hit_penalty;
  float tag_reward;
  float neg_tag_penalty;
  float step_cost;
  float neg_step_cost;
  float grid_length_f;
  float episode_length_f;
  int unused;  // keeps the struct a multiple of 8 bytes, as the pointer structs after it
};

struct GridState {
  int* x;  // (G, A)
  int* y;
  int* t;  // (G,)
};

struct GridBuffers {
  const long long* seed;
  long long* rng_counter;
  bool* pending;
  bool* invalid_action;
  int* error_count;
  int* game_bad;     // (G,) scratch, zero between steps
  int* game_tagged;  // (G,) scratch
  int* game_ended;   // (G,) scratch
  bool* visible;     // (G*A,) scratch
};

struct GridOutputs {
  float* obs;
  float* reward;
  bool* terminated;
  bool* truncated;
  float* final_obs;
  bool* active;
};

struct Agent {
  int g, a;
  long long slot;
  bool on;
};

__device__ __forceinline__ bool game_stepping(const GridBuffers& b, int g, int mode) {
  return b.game_bad[g] == 0 && (mode == GV_AUTORESET_SAME_STEP || !b.pending[g]);
}

__device__ void reset_agent(const GridConsts& c, const GridState& s, const GridBuffers& b,
                            const Agent& ag) {
  const int L = c.grid_length;
  if (c.random_start) {
    const GvWords4 w = gv_random_block(b.seed[ag.g], ag.g, b.rng_counter[ag.g],
                                       (uint32_t)ag.a, GV_STREAM_RESET);
    const float cells = (float)(L + 1);
    s.x[ag.slot] = (int)fminf(floorf(gv_uniform01(w.w[0]) * cells), (float)L);
    s.y[ag.slot] = (int)fminf(floorf(gv_uniform01(w.w[1]) * cells), (float)L);
  } else {
    const bool runner = ag.a == c.num_agents - 1;
    s.x[ag.slot] = runner ? 0 : L / 2;
    s.y[ag.slot] = runner ? 0 : L / 2;
  }
}

__device__ void write_observation(const GridConsts& c, const GridState& s, const Agent& ag,
                                  bool visible, float* out) {
  float* row = out + ag.slot * (long long)c.obs_dim;
  if (!visible) {
    for (int k = 0; k < c.obs_dim; ++k) row[k] = 0.0f;
    return;
  }
  const int A = c.num_agents;
  const long long game = (long long)ag.g * A;
  const float time = (float)s.t[ag.g] / c.episode_length_f;
  if (c.full_observation) {
    for (int j = 0; j < A; ++j) {
      row[j] = (float)s.x[game + j] / c.grid_length_f;
      row[A + j] = (float)s.y[game + j] / c.grid_length_f;
      row[2 * A + j] = j == A - 1 ? 1.0f : 0.0f;
      row[3 * A + j] = j == ag.a ? 1.0f : 0.0f;
    }
    row[4 * A] = time;
    return;
  }
  const bool runner = ag.a == A - 1;
  int target = A - 1;
  if (runner) {
    // Nearest tagger by squared distance; the first minimum keeps the lowest id.
    int best = 0;
    for (int j = 0; j < A - 1; ++j) {
      const int dx = s.x[game + j] - s.x[ag.slot], dy = s.y[game + j] - s.y[ag.slot];
      const int d2 = dx * dx + dy * dy;
      if (j == 0 || d2 < best) {
        best = d2;
        target = j;
      }
    }
  }
  row[0] = (float)s.x[ag.slot] / c.grid_length_f;
  row[1] = (float)s.y[ag.slot] / c.grid_length_f;
  row[2] = (float)s.x[game + target] / c.grid_length_f;
  row[3] = (float)s.y[game + target] / c.grid_length_f;
  row[4] = runner ? 1.0f : 0.0f;
  row[5] = time;
}

extern "C" __global__ void tag_grid_run(const GridConsts c, const GridState s,
                                        const GridBuffers b, const GridOutputs o,
                                        const long long* __restrict__ action,
                                        const bool* __restrict__ mask, int blocks_per_game,
                                        int mode, int first_phase, int last_phase) {
  Agent ag;
  ag.g = blockIdx.x / blocks_per_game;
  ag.a = (blockIdx.x % blocks_per_game) * blockDim.x + threadIdx.x;
  ag.on = ag.a < c.num_agents;
  ag.slot = (long long)ag.g * c.num_agents + ag.a;
  const int g = ag.g;
  const long long i = ag.slot;
  const bool runner = ag.a == c.num_agents - 1;
  const bool same_step = mode == GV_AUTORESET_SAME_STEP;
  for (int phase = first_phase; phase <= last_phase; ++phase) {
    if (phase > first_phase) __syncthreads();
    if (!ag.on) continue;
    switch (phase) {
      case kValidate: {
        const long long a = action[i];
        const bool valid = a >= 0 && a < 5;
        b.invalid_action[i] = !valid;
        if (!valid) {
          atomicAdd(&b.game_bad[g], 1);
          atomicAdd(b.error_count, 1);
        }
        break;
      }
      case kMove: {
        float reward = 0.0f;
        if (game_stepping(b, g, mode)) {
          const long long a = action[i];
          const int wanted_x = s.x[i] + (a == 1 ? 1 : (a == 2 ? -1 : 0));
          const int wanted_y = s.y[i] + (a == 3 ? 1 : (a == 4 ? -1 : 0));
          const int x = min(max(wanted_x, 0), c.grid_length);
          const int y = min(max(wanted_y, 0), c.grid_length);
          s.x[i] = x;
          s.y[i] = y;
          reward = (x != wanted_x || y != wanted_y) ? c.neg_wall_hit_penalty : 0.0f;
          if (ag.a == 0) s.t[g] += 1;
        } else if (mode == GV_AUTORESET_NEXT_STEP && b.game_bad[g] == 0 && b.pending[g]) {
          reset_agent(c, s, b, ag);
          if (ag.a == 0) s.t[g] = 0;
        }
        o.reward[i] = reward;
        break;
      }
      case kTag:
        if (!runner && game_stepping(b, g, mode)) {
          const long long r = (long long)g * c.num_agents + c.num_agents - 1;
          if (s.x[i] == s.x[r] && s.y[i] == s.y[r]) atomicAdd(&b.game_tagged[g], 1);
        }
        break;
      case kFinish: {
        const bool stepping = game_stepping(b, g, mode);
        const bool tagged = b.game_tagged[g] != 0;
        if (stepping) {
          const float role = tagged ? (runner ? c.neg_tag_penalty : c.tag_reward)
                                    : (runner ? c.step_cost : c.neg_step_cost);
          o.reward[i] = o.reward[i] + role;
        }
        const bool terminated = stepping && tagged;
        const bool truncated = stepping && s.t[g] >= c.episode_length;
        o.terminated[i] = terminated;
        o.truncated[i] = truncated && !terminated;
        b.visible[i] = true;
        const bool ended = terminated || truncated;
        if (ag.a == 0) b.game_ended[g] = ended ? 1 : 0;
        const bool bad = b.game_bad[g] != 0, pending = b.pending[g];
        bool pending_after = pending || ended;
        if (mode == GV_AUTORESET_NEXT_STEP) pending_after = ended || (pending && bad);
        if (mode == GV_AUTORESET_SAME_STEP) pending_after = false;
        o.active[i] = !pending_after;
        break;
      }
      case kFinalObs:
        if (same_step) write_observation(c, s, ag, true, o.final_obs);
        break;
      case kSameStepReset:
        if (same_step && game_stepping(b, g, mode) && b.game_ended[g] != 0) {
          reset_agent(c, s, b, ag);
          if (ag.a == 0) s.t[g] = 0;
        }
        break;
      case kObserveStep: {
        write_observation(c, s, ag, true, o.obs);
        if (ag.a != 0) break;
        const bool bad = b.game_bad[g] != 0;
        const bool pending = b.pending[g];
        const bool ended = game_stepping(b, g, mode) && b.game_ended[g] != 0;
        if (mode == GV_AUTORESET_NEXT_STEP) {
          if (!bad && pending) b.rng_counter[g] += 1;
          b.pending[g] = ended || (pending && bad);
        } else if (mode == GV_AUTORESET_SAME_STEP) {
          if (ended) b.rng_counter[g] += 1;
          b.pending[g] = false;
        } else {
          b.pending[g] = pending || ended;
        }
        b.game_bad[g] = 0;
        b.game_tagged[g] = 0;
        b.game_ended[g] = 0;
        break;
      }
      case kResetAgents:
        if (mask == nullptr || mask[g]) {
          reset_agent(c, s, b, ag);
          if (ag.a == 0) s.t[g] = 0;
        }
        break;
      case kResetGames:
        if (ag.a == 0 && (mask == nullptr || mask[g])) {
          b.rng_counter[g] += 1;
          b.pending[g] = false;
        }
        break;
      case kObserveOnly:
        write_observation(c, s, ag, b.visible[i], o.obs);
        break;
    }
  }
}
