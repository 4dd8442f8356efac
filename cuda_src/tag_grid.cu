// Gridworld Tag (envs/tag_grid.py, docs/tag_rules.md): G games of A agents (the last one
// the runner), one thread per agent, in the phases of common/games.cuh: kValidate,
// kMove (or NEXT_STEP reset), kInteract (taggers on the runner's cell count into an
// integer per game), kFinish (rewards and flags), kFinalObs / kSameStepReset (SAME_STEP),
// kObserveStep (observations and the game's bookkeeping). Compile with -fmad=false.
#include "common/games.cuh"
#include "common/math.cuh"
#include "common/rng.cuh"

// The constants of envs/tag_grid.py's kernel binding, in order (checked at load). `unused`
// keeps the struct a multiple of 8 bytes, as the pointer structs after it.
#define GRID_CONSTS(FIELD)                                                                 \
  FIELD(int, num_agents)                                                                   \
  FIELD(int, grid_length)                                                                  \
  FIELD(int, episode_length)                                                               \
  FIELD(int, full_observation)                                                             \
  FIELD(int, random_start)                                                                 \
  FIELD(int, obs_dim)                                                                      \
  FIELD(float, neg_wall_hit_penalty)                                                       \
  FIELD(float, tag_reward)                                                                 \
  FIELD(float, neg_tag_penalty)                                                            \
  FIELD(float, step_cost)                                                                  \
  FIELD(float, neg_step_cost)                                                              \
  FIELD(float, grid_length_f)                                                              \
  FIELD(float, episode_length_f)                                                           \
  FIELD(int, unused)

GV_GAME_CONSTS(GridConsts, tag_grid, GRID_CONSTS)

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
  GV_GAME_AGENT(ag, c.num_agents, blocks_per_game)
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
        if (gv_game_stepping(b, g, mode)) {
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
      case kInteract:
        if (!runner && gv_game_stepping(b, g, mode)) {
          const long long r = (long long)g * c.num_agents + c.num_agents - 1;
          if (s.x[i] == s.x[r] && s.y[i] == s.y[r]) atomicAdd(&b.game_tagged[g], 1);
        }
        break;
      case kFinish: {
        const bool stepping = gv_game_stepping(b, g, mode);
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
        GV_PENDING_AFTER(pending_after, pending, ended, bad, mode)
        o.active[i] = !pending_after;
        break;
      }
      case kFinalObs:
        if (same_step) write_observation(c, s, ag, true, o.final_obs);
        break;
      case kSameStepReset:
        if (same_step && gv_game_stepping(b, g, mode) && b.game_ended[g] != 0) {
          reset_agent(c, s, b, ag);
          if (ag.a == 0) s.t[g] = 0;
        }
        break;
      case kObserveStep: {
        write_observation(c, s, ag, true, o.obs);
        if (ag.a != 0) break;
        gv_finish_game_autoreset(b, g, mode);
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
        gv_reset_game(b, ag, mask);
        break;
      case kObserveOnly:
        write_observation(c, s, ag, b.visible[i], o.obs);
        break;
    }
  }
}
