// One scenario of the Tag kernels of cuda_src/tag.cu under the host emulation of shim.h:
// random games (crowds around taggers, runners out, pending resets, last steps), `steps`
// steps of random actions with invalid ones; every buffer is dumped after each step and
// after a reset of some games and an observation of all, to compare two builds bytewise
// (compare.sh). Floats come from the host's libm, so the
// results are not the GPU's, but two versions of the kernel must agree with each other.
// Built with -DEMU_SCAN_HELPERS (a tag.cu with TagConsts::scan_helpers), `helpers` = n > 0
// launches (n + 1) * A threads per block (rounded up to 32) with n scan helpers per agent, as
// gpu_vecenv/multi_agent/cuda_backend.py does; `ties` = 1 starts the agents at rest on a
// grid of whole numbers, and about half of them keep still (actions 0, 0), so many
// distances are equal. Built with -DEMU_PACKED (a tag.cu with tag_step_packed_*), `packed` =
// n > 1 runs each step as the packed step (n <= 32 / A games a 32-thread block, A <= 16), as
// cuda_backend.py launches it; reset() and observe() stay one game a block. Built with
// -DEMU_OPTIONS (a tag.cu with the *_options kernels, built with -DTAG_ONLY_OPTIONS
// -DTAG_ONLY_PLAIN), `own_state` = 1 and `egocentric` = 1 launch those with
// observe_own_state and egocentric.
#include "shim.h"

#ifndef EMU_TILE_BYTES
#define EMU_TILE_BYTES 36  // bytes per thread of TagShared before the stage
#endif
#include "tag_emu.cu"
#include <cstdio>
#include <random>
#include <algorithm>
#include <functional>

using Kernel = void (*)(const TagConsts, const TagState, const TagBuffers, const TagOutputs,
                        const long long*, const bool*, int, int, int, int);

static void launch(Kernel k, int grid, int block, const TagConsts& c, const TagState& s,
                   const TagBuffers& b, const TagOutputs& o, const long long* action,
                   const bool* mask, int bpg, int mode, int first, int last) {
  blockDim.x = block;
  for (int blk = 0; blk < grid; ++blk) {
    blockIdx.x = blk;
    std::barrier<> bar(block);
    emu_block_barrier = &bar;
    emu_warps.clear();
    for (int w = 0; w < block / 32; ++w) emu_warps.push_back(new EmuWarp());
    std::vector<std::thread> threads;
    for (int t = 0; t < block; ++t)
      threads.emplace_back([&, t] { threadIdx.x = t; k(c, s, b, o, action, mask, bpg, mode, first, last); });
    for (auto& t : threads) t.join();
    for (auto* w : emu_warps) delete w;
  }
}

int main(int argc, char** argv) {
  // args: G A T K(0 full) mode steps seed staged exits invalid_rate phased block_cap out
  //       [helpers [ties [packed [own_state [egocentric]]]]]
  int G = atoi(argv[1]), A = atoi(argv[2]), T = atoi(argv[3]), K = atoi(argv[4]);
  int mode = atoi(argv[5]), steps = atoi(argv[6]), seed = atoi(argv[7]), staged = atoi(argv[8]);
  int exits = atoi(argv[9]); double invalid_rate = atof(argv[10]);
  int phased = atoi(argv[11]);  // 1: one launch per phase (the generic path)
  int block_cap = atoi(argv[12]);
  const char* out = argv[13];
  const int helpers = argc > 14 ? atoi(argv[14]) : 0, ties = argc > 15 ? atoi(argv[15]) : 0;
  const int packed = argc > 16 ? atoi(argv[16]) : 0;
  const int own_state = argc > 17 ? atoi(argv[17]) : 0;
  const int egocentric = argc > 18 ? atoi(argv[18]) : 0;
  const bool options = own_state || egocentric;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> U(0.0f, 1.0f);
  TagConsts c{};
  c.num_agents = A; c.num_taggers = T; c.episode_length = 6;
  c.num_acceleration_actions = 11; c.num_turn_actions = 11;
  c.full_observation = K == 0; c.own_role = 1; c.num_observed = K == 0 ? A - 1 : K;
  c.exits = exits; c.fixed_start = 0; c.obs_dim = 7 * c.num_observed + 2;
  c.grid_length = 10.0f; c.vmax_tagger = 1.0f; c.vmax_runner = 1.2f; c.tag_threshold = 0.8f;
  c.position_scale = std::sqrt(2.0f) * 10.0f; c.speed_scale = 1.0f; c.two_pi = 6.2831855f;
  c.half_pi = 1.5707964f; c.edge_hit_penalty = -0.1f; c.step_tagger = -0.01f;
  c.step_runner = 0.01f; c.tag_reward = 10.0f; c.tag_penalty = -10.0f; c.end_reward = 1.0f;
  c.episode_length_f = 6.0f;
  if (options) {
#ifdef EMU_OPTIONS
    c.own_state = own_state;
    c.egocentric = egocentric;
    c.obs_dim += own_state ? kTagOwnStateFeatures : 0;
#else
    fprintf(stderr, "built without EMU_OPTIONS\n");
    return 2;
#endif
  }
  const int N = G * A, D = c.obs_dim;
  int block = 32 * ((A + 31) / 32); if (block > block_cap) block = block_cap;
  if (helpers) {
#ifdef EMU_SCAN_HELPERS
    const int parts = helpers + 1;
    block = 32 * ((parts * A + 31) / 32);
    if (K == 0 || parts * A > block_cap || parts > TAG_SCAN_MAX_PARTS) {
      fprintf(stderr, "no scan helpers here\n");
      return 2;
    }
    c.scan_helpers = helpers;
    c.scan_split = (A + parts - 1) / parts;
#else
    fprintf(stderr, "built without EMU_SCAN_HELPERS\n");
    return 2;
#endif
  }
  int bpg = (A + block - 1) / block;
  const int per_block = packed;  // games a block of the packed step
#ifdef EMU_PACKED
  c.num_games = G;
  c.packed_games = packed ? per_block : 1;
#endif
  if (packed) {
#ifdef EMU_PACKED
    if (packed < 2 || packed * A > 32 || helpers || phased) {
      fprintf(stderr, "no packed step here\n");
      return 2;
    }
#else
    fprintf(stderr, "built without EMU_PACKED\n");
    return 2;
#endif
  }
  std::vector<float> x(N), y(N), sp(N), dir(N), ac(N), obs((size_t)N * D), fobs((size_t)N * D), rew(N);
  std::vector<int> ing(N), t(G), bad(G), left(G), ended(G), tagc(G * T);
  std::vector<long long> sd(G), rc(G), act(2 * N);
  std::vector<unsigned char> pend(G), inv(N), vis(N), term(N), trunc(N), active(N);
  float acc_table[11], turn_table[11];
  acc_table[0] = turn_table[0] = 0.0f;
  for (int k = 1; k < 11; ++k) { acc_table[k] = -1.0f + 0.2f * (k - 1); turn_table[k] = -1.5f + 0.3f * (k - 1); }
  for (int g = 0; g < G; ++g) {
    sd[g] = 1234 + g; rc[g] = rng() % 5; pend[g] = U(rng) < 0.25f; t[g] = 3 + rng() % 3;
    bool none_left = U(rng) < 0.15f;
    for (int a = 0; a < A; ++a) {
      int i = g * A + a;
      x[i] = U(rng) * 10.0f; y[i] = U(rng) * 10.0f;
      if (a >= T && U(rng) < 0.4f) { int tg = g * A + rng() % T; x[i] = x[tg] + (U(rng) - 0.5f); y[i] = y[tg] + (U(rng) - 0.5f); }
      ing[i] = a < T ? 1 : (none_left ? 0 : U(rng) < 0.8f);
      sp[i] = U(rng) * ing[i]; dir[i] = U(rng) * 6.0f * ing[i]; ac[i] = (U(rng) - 0.5f) * ing[i];
      if (ties) { x[i] = (float)(rng() % 5 + 3); y[i] = (float)(rng() % 5 + 3); sp[i] = 0.0f; ac[i] = 0.0f; }
    }
  }
  TagState s{x.data(), y.data(), sp.data(), dir.data(), ac.data(), ing.data(), t.data()};
  int errors = 0;
  TagBuffers b{sd.data(), rc.data(), (bool*)pend.data(), (bool*)inv.data(), &errors, bad.data(),
               left.data(), ended.data(), tagc.data(), (bool*)vis.data(), acc_table, turn_table};
  TagOutputs o{obs.data(), rew.data(), (bool*)term.data(), (bool*)trunc.data(),
               mode == 1 ? fobs.data() : nullptr, (bool*)active.data()};
  unsigned base = block * EMU_TILE_BYTES;  // TagShared without the stage
  if (helpers) base += (helpers + 1) * A * c.num_observed * 8;  // the parts' lists
  emu_smem_bytes = staged ? base + block * (D | 1) * 4 : base;
  Kernel k = K == 0 ? tag_run_full : (K <= 4 ? tag_run_k4 : tag_run_k10);
#ifdef EMU_OPTIONS
  if (options) k = K == 0 ? tag_run_full_options : (K <= 4 ? tag_run_k4_options : tag_run_k10_options);
#endif
  Kernel step_kernel = k;
#ifdef EMU_PACKED
  if (packed) step_kernel = K == 0 ? tag_step_packed_full : (K <= 4 ? tag_step_packed_k4 : tag_step_packed_k10);
#ifdef EMU_OPTIONS
  if (packed && options) {
    step_kernel = K == 0 ? tag_step_packed_full_options
                         : (K <= 4 ? tag_step_packed_k4_options : tag_step_packed_k10_options);
  }
#endif
#endif
#ifdef EMU_SCAN_HELPERS
  if (helpers) k = K <= 4 ? tag_run_k4_helpers : tag_run_k10_helpers;
#ifdef EMU_OPTIONS
  if (helpers && options) k = K <= 4 ? tag_run_k4_helpers_options : tag_run_k10_helpers_options;
#endif
#endif
  FILE* f = fopen(out, "wb");
  auto dump = [&]() {
    fwrite(x.data(), 4, N, f); fwrite(y.data(), 4, N, f); fwrite(sp.data(), 4, N, f);
    fwrite(dir.data(), 4, N, f); fwrite(ac.data(), 4, N, f); fwrite(ing.data(), 4, N, f);
    fwrite(t.data(), 4, G, f); fwrite(rc.data(), 8, G, f); fwrite(pend.data(), 1, G, f);
    fwrite(inv.data(), 1, N, f); fwrite(&errors, 4, 1, f); fwrite(obs.data(), 4, (size_t)N * D, f);
    fwrite(fobs.data(), 4, (size_t)N * D, f); fwrite(rew.data(), 4, N, f); fwrite(term.data(), 1, N, f);
    fwrite(trunc.data(), 1, N, f); fwrite(active.data(), 1, N, f);
    fwrite(bad.data(), 4, G, f); fwrite(left.data(), 4, G, f); fwrite(ended.data(), 4, G, f);
    fwrite(tagc.data(), 4, G * T, f);
  };
  std::vector<int> phases = mode == 1 ? std::vector<int>{0, 1, 2, 3, 4, 5, 6} : std::vector<int>{0, 1, 2, 3, 6};
  long tagged_out = 0, truncated = 0, bad_games = 0, resets = 0, tied = 0;
  for (int step = 0; step < steps; ++step) {
    for (int i = 0; i < N; ++i) {
      act[2 * i] = rng() % 11; act[2 * i + 1] = rng() % 11;
      if (ties && rng() % 2) act[2 * i] = act[2 * i + 1] = 0;
      if (U(rng) < invalid_rate) act[2 * i + (rng() % 2)] = (rng() % 2) ? -1 : 11;
    }
    if (phased || bpg > 1) {
      for (int p : phases) launch(k, G * bpg, block, c, s, b, o, act.data(), nullptr, bpg, mode, p, p);
    } else if (packed) {
      const unsigned smem = emu_smem_bytes;
      emu_smem_bytes = 32 * EMU_TILE_BYTES + (staged ? per_block * A * (D | 1) * 4 : 0);
      launch(step_kernel, (G + per_block - 1) / per_block, 32, c, s, b, o, act.data(), nullptr, 1,
             mode, phases.front(), phases.back());
      emu_smem_bytes = smem;
    } else {
      launch(k, G * bpg, block, c, s, b, o, act.data(), nullptr, bpg, mode, phases.front(), phases.back());
    }
    dump();
    // reset() of some games, then observe() with a visibility pattern (the launches of
    // GameCudaBackend.reset_games and .observe).
    std::vector<unsigned char> mask(G);
    for (int g = 0; g < G; ++g) mask[g] = (g + step) % 3 == 0;
    for (int p : {7, 8})
      launch(k, G * bpg, block, c, s, b, o, act.data(), (bool*)mask.data(), bpg, mode, p, p);
    for (int i = 0; i < N; ++i) vis[i] = (i * 7 + step) % 3 != 0;
    launch(k, G * bpg, block, c, s, b, o, act.data(), nullptr, bpg, mode, 9, 9);
    dump();
    for (int i = 0; i < N; ++i) { tagged_out += term[i]; truncated += trunc[i]; }
    for (int i = 0; i < N; ++i) {  // observers in the game with two others at one distance
      const int g = i / A;
      std::vector<float> d2;
      for (int j = g * A; j < (g + 1) * A; ++j) {
        if (j == i || !ing[j]) continue;
        const float dx = x[j] - x[i], dy = y[j] - y[i];
        d2.push_back(dx * dx + dy * dy);
      }
      std::sort(d2.begin(), d2.end());
      tied += ing[i] && std::adjacent_find(d2.begin(), d2.end()) != d2.end();
    }
    for (int g = 0; g < G; ++g) {
      bool any_bad = false;
      for (int a = 0; a < A; ++a) any_bad |= inv[g * A + a] != 0;
      bad_games += any_bad;
      resets += t[g] == 0;
    }
  }
  fclose(f);
  printf("G=%d A=%d block=%d bpg=%d errors=%d terminated=%ld truncated=%ld games with invalid "
         "actions=%ld games at t=0=%ld observers with ties=%ld\n", G, A, block, bpg, errors,
         tagged_out, truncated, bad_games, resets, tied);
}
