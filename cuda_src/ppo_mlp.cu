// Fused PPO kernels for small actor-critic MLPs (host side: gpu_vecenv/train/fused.py).
//
// A minibatch step of PPO on a 64x64 MLP is ~180 small torch kernels (forward, loss,
// autograd backward, gradient clipping); here it is four: ppo_update_tiles computes the
// forward pass, the loss and its gradient for tiles of TILE samples (one sample per
// thread column, GROUPS threads share a sample's units) and accumulates weight gradients
// per block; ppo_reduce_grads sums the blocks in a fixed order; clip_grads scales by the
// global norm; the optimizer (torch's fused Adam) follows. ppo_act samples actions during
// the roll-out, mlp_values computes V(obs) for GAE, gae_advantages is the backward scan.
//
// Every size is a compile-time constant (-D flags, one cubin per network shape):
//   OBS_DIM, NUM_HIDDEN (1..4), H0..H3, ACTOR_OUT (logits or means), ACTIVATION (0 tanh,
//   1 relu, 2 elu), HEAD_GAUSSIAN (1: Box, else categorical), NUM_SEG (1..8) with SEG0..7
//   (category counts) and START0..7 (the space's start), NORMALIZE_OBS, TILE, GROUPS.
//
// Parameters are one flat float32 buffer in ActorCritic.parameters() order: actor layers
// (weight [out][in] row-major, then bias), critic layers, then log_std (Box). Nothing is
// atomic: every sum runs in a fixed order, so a launch is deterministic.
#include <stdint.h>

#if !defined(OBS_DIM) || !defined(NUM_HIDDEN) || !defined(ACTOR_OUT) || !defined(ACTIVATION) \
    || !defined(HEAD_GAUSSIAN) || !defined(NUM_SEG) || !defined(NORMALIZE_OBS) \
    || !defined(TILE) || !defined(GROUPS)
#error "ppo_mlp.cu needs its sizes as -D flags (see gpu_vecenv/train/fused.py)"
#endif
#ifndef H1
#define H1 0
#endif
#ifndef H2
#define H2 0
#endif
#ifndef H3
#define H3 0
#endif
#ifndef SEG0
#define SEG0 0
#endif
#ifndef SEG1
#define SEG1 0
#endif
#ifndef SEG2
#define SEG2 0
#endif
#ifndef SEG3
#define SEG3 0
#endif
#ifndef SEG4
#define SEG4 0
#endif
#ifndef SEG5
#define SEG5 0
#endif
#ifndef SEG6
#define SEG6 0
#endif
#ifndef SEG7
#define SEG7 0
#endif
#ifndef START0
#define START0 0
#endif
#ifndef START1
#define START1 0
#endif
#ifndef START2
#define START2 0
#endif
#ifndef START3
#define START3 0
#endif
#ifndef START4
#define START4 0
#endif
#ifndef START5
#define START5 0
#endif
#ifndef START6
#define START6 0
#endif
#ifndef START7
#define START7 0
#endif

namespace {

constexpr int D = OBS_DIM;
constexpr int L = NUM_HIDDEN;
constexpr int A = ACTOR_OUT;
constexpr int S = TILE;        // samples per tile
constexpr int G = GROUPS;      // threads per sample
constexpr int T = S * G;       // threads per block
constexpr int SP = S + 1;      // row stride of activations in shared memory (no bank conflicts)
constexpr int U = 4;           // units per thread and pass in the layer loops
#if HEAD_GAUSSIAN
constexpr float LOG_SQRT_2PI = 0.91893853320467274178f;
#endif

__host__ __device__ constexpr int hidden(int k) {
  return k == 0 ? H0 : k == 1 ? H1 : k == 2 ? H2 : H3;
}
#if !HEAD_GAUSSIAN
__host__ __device__ constexpr int seg_size(int c) {
  return c == 0 ? SEG0 : c == 1 ? SEG1 : c == 2 ? SEG2 : c == 3 ? SEG3
       : c == 4 ? SEG4 : c == 5 ? SEG5 : c == 6 ? SEG6 : SEG7;
}
__host__ __device__ constexpr int seg_start(int c) {
  return c == 0 ? START0 : c == 1 ? START1 : c == 2 ? START2 : c == 3 ? START3
       : c == 4 ? START4 : c == 5 ? START5 : c == 6 ? START6 : START7;
}
#endif
// Layer k of a net maps in_size(k) -> out_size(k, out); layer L is the output layer.
__host__ __device__ constexpr int in_size(int k) { return k == 0 ? D : hidden(k - 1); }
__host__ __device__ constexpr int out_size(int k, int out) { return k == L ? out : hidden(k); }
__host__ __device__ constexpr int align4(int n) { return (n + 3) / 4 * 4; }
// Offset of layer k's weight within a net (its bias follows the weight). Every weight
// starts at a multiple of 4 floats (16 bytes) so rows load as float4; layer_offset(L + 1)
// is the net's padded size.
__host__ __device__ constexpr int layer_offset(int k, int out) {
  int n = 0;
  for (int j = 0; j < k; ++j) n = align4(n + in_size(j) * out_size(j, out) + out_size(j, out));
  return n;
}
__host__ __device__ constexpr int rows_before(int k) {  // activation rows of hidden layers < k
  int n = 0;
  for (int j = 0; j < k; ++j) n += hidden(j);
  return n;
}
__host__ __device__ constexpr int max_width() {
  int m = A > D ? A : D;
  for (int j = 0; j < L; ++j) m = hidden(j) > m ? hidden(j) : m;
  return m;
}

constexpr int HSUM = rows_before(L);
constexpr int HMAX = max_width();
constexpr int ACTOR_BASE = 0;
constexpr int CRITIC_BASE = layer_offset(L + 1, A);
constexpr int LOG_STD_BASE = CRITIC_BASE + layer_offset(L + 1, 1);
constexpr int NUM_PARAMS = align4(LOG_STD_BASE + (HEAD_GAUSSIAN ? A : 0));
constexpr int ACTION_DIM = HEAD_GAUSSIAN ? A : NUM_SEG;
constexpr int NSTATS = 5;                    // policy loss, value loss, entropy, kl, clipped
constexpr int NROWS = NSTATS + (HEAD_GAUSSIAN ? A : 0);   // + per-sample log_std gradients

// Shared memory (floats): x, actor activations + output, critic activations + output,
// four gradient buffers, [update only:] the block's gradient sums, stats rows, stats sums.
constexpr int X_OFF = 0;
constexpr int ACTOR_OFF = X_OFF + D * SP;
constexpr int CRITIC_OFF = ACTOR_OFF + (HSUM + A) * SP;
constexpr int DZ_OFF = CRITIC_OFF + (HSUM + 1) * SP;
constexpr int GRAD_OFF = DZ_OFF + 4 * HMAX * SP;
constexpr int STATS_OFF = GRAD_OFF + NUM_PARAMS;
constexpr int STAT_SUM_OFF = STATS_OFF + NROWS * SP;
constexpr int ROWS_OFF = STAT_SUM_OFF + NROWS;
constexpr int UPDATE_SMEM_BYTES = (ROWS_OFF + S) * 4;
constexpr int FORWARD_SMEM_BYTES = (DZ_OFF + S) * 4;   // x, activations, sample rows

__device__ __forceinline__ float activate(float z) {
#if ACTIVATION == 0
  return tanhf(z);
#elif ACTIVATION == 1
  return z > 0.f ? z : 0.f;
#else
  return z > 0.f ? z : expm1f(z);
#endif
}

// d activation / d input, from the activation's output.
__device__ __forceinline__ float activation_grad(float a) {
#if ACTIVATION == 0
  return 1.f - a * a;
#elif ACTIVATION == 1
  return a > 0.f ? 1.f : 0.f;
#else
  return a > 0.f ? 1.f : a + 1.f;
#endif
}

// out[j][s] = act(b[j] + sum_i w[j][i] in[i][s]) for this thread's sample s and its units
// j = g, g + G, ...; w is the layer's weight (16-byte aligned), its bias follows it. With
// in_n a multiple of 4, weight rows are read 4 at a time (one float4 per unit and 4 inputs).
__device__ __forceinline__ void forward_layer(const float* __restrict__ w, int in_n, int out_n,
                                              bool act, const float* in, float* out, int s,
                                              int g) {
  for (int j0 = g; j0 < out_n; j0 += G * U) {
    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = j0 + u * G;
      acc[u] = j < out_n ? __ldg(w + out_n * in_n + j) : 0.f;
    }
    if (in_n % 4 == 0) {
      for (int i = 0; i < in_n; i += 4) {
        const float x0 = in[i * SP + s], x1 = in[(i + 1) * SP + s];
        const float x2 = in[(i + 2) * SP + s], x3 = in[(i + 3) * SP + s];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int j = j0 + u * G;
          if (j < out_n) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(w + j * in_n + i));
            acc[u] = fmaf(v.w, x3, fmaf(v.z, x2, fmaf(v.y, x1, fmaf(v.x, x0, acc[u]))));
          }
        }
      }
    } else {
      for (int i = 0; i < in_n; ++i) {
        const float x = in[i * SP + s];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int j = j0 + u * G;
          if (j < out_n) acc[u] = fmaf(__ldg(w + j * in_n + i), x, acc[u]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = j0 + u * G;
      if (j < out_n) out[j * SP + s] = act ? activate(acc[u]) : acc[u];
    }
  }
}

// dz_prev[i][s] = act'(a_prev[i][s]) * sum_j w[j][i] dz[j][s]. With in_n a multiple of 4,
// a thread takes 8 consecutive inputs (two float4 reads of each weight row).
__device__ __forceinline__ void backward_layer(const float* __restrict__ w, int in_n, int out_n,
                                               const float* dz, const float* a_prev,
                                               float* dz_prev, int s, int g) {
  if (in_n % 4 == 0) {
    const int quads = in_n / 4;
    for (int q0 = g; q0 < quads; q0 += 2 * G) {
      const int q1 = q0 + G;
      const bool second = q1 < quads;
      float acc[8];
#pragma unroll
      for (int r = 0; r < 8; ++r) acc[r] = 0.f;
      for (int j = 0; j < out_n; ++j) {
        const float d = dz[j * SP + s];
        const float4 a = __ldg(reinterpret_cast<const float4*>(w + j * in_n + 4 * q0));
        acc[0] = fmaf(a.x, d, acc[0]);
        acc[1] = fmaf(a.y, d, acc[1]);
        acc[2] = fmaf(a.z, d, acc[2]);
        acc[3] = fmaf(a.w, d, acc[3]);
        if (second) {
          const float4 b = __ldg(reinterpret_cast<const float4*>(w + j * in_n + 4 * q1));
          acc[4] = fmaf(b.x, d, acc[4]);
          acc[5] = fmaf(b.y, d, acc[5]);
          acc[6] = fmaf(b.z, d, acc[6]);
          acc[7] = fmaf(b.w, d, acc[7]);
        }
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = 4 * q0 + r;
        dz_prev[i * SP + s] = acc[r] * activation_grad(a_prev[i * SP + s]);
      }
      if (second) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int i = 4 * q1 + r;
          dz_prev[i * SP + s] = acc[4 + r] * activation_grad(a_prev[i * SP + s]);
        }
      }
    }
    return;
  }
  for (int i0 = g; i0 < in_n; i0 += G * U) {
    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = 0.f;
    for (int j = 0; j < out_n; ++j) {
      const float d = dz[j * SP + s];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = i0 + u * G;
        if (i < in_n) acc[u] = fmaf(__ldg(w + j * in_n + i), d, acc[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = i0 + u * G;
      if (i < in_n) dz_prev[i * SP + s] = acc[u] * activation_grad(a_prev[i * SP + s]);
    }
  }
}

// grad[j][i] += sum_s dz[j][s] a_prev[i][s]; grad_bias[j] += sum_s dz[j][s] (fixed order).
// With out_n even and in_n a multiple of 4, a thread owns 2 x 4 entries (rows j, j + 1;
// columns i, i + Q, i + 2Q, i + 3Q with Q = in_n / 4: neighbouring threads read
// neighbouring columns, so the shared-memory reads do not conflict).
__device__ __forceinline__ void weight_grad(float* grad, int in_n, int out_n, const float* dz,
                                            const float* a_prev, int tid) {
  if (out_n % 2 == 0 && in_n % 4 == 0) {
    const int q = in_n / 4;
    for (int t = tid; t < (out_n / 2) * q; t += T) {
      const int j = 2 * (t / q), i = t - (t / q) * q;
      float acc[8];
#pragma unroll
      for (int r = 0; r < 8; ++r) acc[r] = 0.f;
#pragma unroll 4
      for (int s = 0; s < S; ++s) {
        const float d0 = dz[j * SP + s], d1 = dz[(j + 1) * SP + s];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float a = a_prev[(i + r * q) * SP + s];
          acc[r] = fmaf(d0, a, acc[r]);
          acc[4 + r] = fmaf(d1, a, acc[4 + r]);
        }
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        grad[j * in_n + i + r * q] += acc[r];
        grad[(j + 1) * in_n + i + r * q] += acc[4 + r];
      }
    }
  } else {
    for (int e = tid; e < out_n * in_n; e += T) {
      const int j = e / in_n, i = e - j * in_n;
      float acc = 0.f;
#pragma unroll 8
      for (int s = 0; s < S; ++s) acc = fmaf(dz[j * SP + s], a_prev[i * SP + s], acc);
      grad[e] += acc;
    }
  }
  for (int j = tid; j < out_n; j += T) {
    float acc = 0.f;
    for (int s = 0; s < S; ++s) acc += dz[j * SP + s];
    grad[out_n * in_n + j] += acc;
  }
}

__device__ __forceinline__ float* layer_out_rows(float* acts, int k) {
  return acts + (k == L ? HSUM : rows_before(k)) * SP;
}
__device__ __forceinline__ float* layer_in_rows(float* x, float* acts, int k) {
  return k == 0 ? x : acts + rows_before(k - 1) * SP;
}

// Loads the tile's observations (normalized) into x; rows[s] is the sample's row, -1 past
// the end (its inputs are zeros, so nothing non-finite enters the sums).
__device__ __forceinline__ void load_tile(const float* __restrict__ obs, const int* rows,
                                          const float* __restrict__ norm_mean,
                                          const float* __restrict__ norm_var, float* x,
                                          int tid) {
  for (int e = tid; e < D * S; e += T) {
    const int i = e / S, s = e - i * S;
    const int row = rows[s];
    float v = row >= 0 ? obs[(int64_t)row * D + i] : 0.f;
#if NORMALIZE_OBS
    if (row >= 0) {
      v = (v - norm_mean[i]) * rsqrtf(norm_var[i] + 1e-8f);
      v = fminf(fmaxf(v, -10.f), 10.f);
    }
#endif
    x[i * SP + s] = v;
  }
}

template <bool ACTOR, bool CRITIC>
__device__ __forceinline__ void forward_nets(const float* __restrict__ params, float* smem,
                                             int s, int g) {
  float* x = smem + X_OFF;
#pragma unroll
  for (int k = 0; k <= L; ++k) {
    if (ACTOR)
      forward_layer(params + ACTOR_BASE + layer_offset(k, A), in_size(k), out_size(k, A),
                    k < L, layer_in_rows(x, smem + ACTOR_OFF, k),
                    layer_out_rows(smem + ACTOR_OFF, k), s, g);
    if (CRITIC)
      forward_layer(params + CRITIC_BASE + layer_offset(k, 1), in_size(k), out_size(k, 1),
                    k < L, layer_in_rows(x, smem + CRITIC_OFF, k),
                    layer_out_rows(smem + CRITIC_OFF, k), s, g);
    __syncthreads();
  }
}

}  // namespace

// Layout facts for the host: parameter count, shared bytes of the update and forward
// kernels, tile, threads per block, action components.
__device__ int ppo_mlp_layout[6] = {NUM_PARAMS, UPDATE_SMEM_BYTES,
                                               FORWARD_SMEM_BYTES, S, T, ACTION_DIM};

// Per minibatch: mean and unbiased std of advantages[order[mb * size + k]], k < size.
// One block of 256 threads per minibatch; stats[2 mb], stats[2 mb + 1].
extern "C" __global__ void advantage_stats(const float* __restrict__ advantages,
                                           const int64_t* __restrict__ order, int size,
                                           float* __restrict__ stats) {
  __shared__ float part[256];
  const int mb = blockIdx.x, tid = threadIdx.x;
  const int64_t* idx = order + (int64_t)mb * size;
  float sum = 0.f;
  for (int k = tid; k < size; k += 256) sum += advantages[idx[k]];
  part[tid] = sum;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (tid < w) part[tid] += part[tid + w];
    __syncthreads();
  }
  const float mean = part[0] / (float)size;
  __syncthreads();
  float sq = 0.f;
  for (int k = tid; k < size; k += 256) {
    const float d = advantages[idx[k]] - mean;
    sq += d * d;
  }
  part[tid] = sq;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (tid < w) part[tid] += part[tid + w];
    __syncthreads();
  }
  if (tid == 0) {
    stats[2 * mb] = mean;
    stats[2 * mb + 1] = sqrtf(part[0] / (float)(size - 1));
  }
}

// Forward, PPO loss and backward for the minibatch rows order[start + k], k < size.
// Blocks loop over tiles; each writes its gradient sums (NUM_PARAMS floats) and per-sample
// statistic sums (NROWS floats) to partial_grads / partial_stats at its block index.
// adv_stats: this minibatch's (mean, std) from advantage_stats.
extern "C" __global__ void __launch_bounds__(T) ppo_update_tiles(
    const float* __restrict__ params, const float* __restrict__ obs,
    const void* __restrict__ actions, const float* __restrict__ old_log_probs,
    const float* __restrict__ advantages, const float* __restrict__ returns,
    const float* __restrict__ old_values, const int64_t* __restrict__ order, int start,
    int size, const float* __restrict__ adv_stats, const float* __restrict__ norm_mean,
    const float* __restrict__ norm_var, float clip_coef, float ent_coef, float vf_coef,
    int clip_vloss, int norm_adv, float* __restrict__ partial_grads,
    float* __restrict__ partial_stats) {
  extern __shared__ float smem[];
  const int tid = threadIdx.x, s = tid % S, g = tid / S;
  float* x = smem + X_OFF;
  float* actor = smem + ACTOR_OFF;
  float* critic = smem + CRITIC_OFF;
  float* grad = smem + GRAD_OFF;
  float* stats = smem + STATS_OFF;
  float* stat_sum = smem + STAT_SUM_OFF;
  int* rows = reinterpret_cast<int*>(smem + ROWS_OFF);
  const float inv_b = 1.f / (float)size;
  const float adv_mean = norm_adv ? adv_stats[0] : 0.f;
  const float adv_scale = norm_adv ? adv_stats[1] + 1e-8f : 1.f;

  for (int p = tid; p < NUM_PARAMS; p += T) grad[p] = 0.f;
  for (int r = tid; r < NROWS; r += T) stat_sum[r] = 0.f;
  const int tiles = (size + S - 1) / S;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    __syncthreads();
    if (tid < S) {
      const int k = tile * S + tid;
      rows[tid] = k < size ? (int)order[start + k] : -1;
    }
    __syncthreads();
    load_tile(obs, rows, norm_mean, norm_var, x, tid);
    __syncthreads();
    forward_nets<true, true>(params, smem, s, g);

    float* dza = smem + DZ_OFF;                  // actor gradient rows (ping)
    float* dzc = smem + DZ_OFF + 2 * HMAX * SP;  // critic gradient rows (ping)
    if (tid < S) {
      const int row = rows[s];
      const bool valid = row >= 0;
      const float* out = actor + HSUM * SP;
      float lp = 0.f, ent = 0.f;
#if HEAD_GAUSSIAN
      const float* act = static_cast<const float*>(actions);
#pragma unroll
      for (int d = 0; d < A; ++d) {
        const float log_std = params[LOG_STD_BASE + d];
        const float mu = out[d * SP + s];
        const float a = valid ? act[(int64_t)row * A + d] : mu;
        const float z = (a - mu) / expf(log_std);
        dza[d * SP + s] = z;  // kept for the gradient below
        lp += -0.5f * z * z - log_std - LOG_SQRT_2PI;
        ent += 0.5f + LOG_SQRT_2PI + log_std;
      }
#else
      const int64_t* act = static_cast<const int64_t*>(actions);
      float lse[NUM_SEG], seg_ent[NUM_SEG];
      int chosen[NUM_SEG];
      int o = 0;
#pragma unroll
      for (int c = 0; c < NUM_SEG; ++c) {
        const int n = seg_size(c);
        float m = out[o * SP + s];
        for (int k = 1; k < n; ++k) m = fmaxf(m, out[(o + k) * SP + s]);
        float sum = 0.f;
        for (int k = 0; k < n; ++k) sum += expf(out[(o + k) * SP + s] - m);
        lse[c] = m + logf(sum);
        float h = 0.f;
        for (int k = 0; k < n; ++k) {
          const float logp = out[(o + k) * SP + s] - lse[c];
          h -= expf(logp) * logp;
        }
        seg_ent[c] = h;
        ent += h;
        const int a = valid ? (int)(act[(int64_t)row * NUM_SEG + c] - seg_start(c)) : 0;
        chosen[c] = a;
        lp += out[(o + a) * SP + s] - lse[c];
        o += n;
      }
#endif
      float pg = 0.f, vl = 0.f, kl = 0.f, clipped = 0.f, dlp = 0.f, dv = 0.f;
      if (valid) {
        const float log_ratio = lp - old_log_probs[row];
        const float ratio = expf(log_ratio);
        const float adv = (advantages[row] - adv_mean) / adv_scale;
        const float lo = 1.f - clip_coef, hi = 1.f + clip_coef;
        const float pg1 = -adv * ratio, pg2 = -adv * fminf(fmaxf(ratio, lo), hi);
        const bool in_range = ratio >= lo && ratio <= hi;
        // torch.max's gradient: the larger input, half to each on a tie.
        const float dratio = pg1 > pg2 ? -adv
                           : pg1 < pg2 ? (in_range ? -adv : 0.f)
                                       : 0.5f * -adv + (in_range ? 0.5f * -adv : 0.f);
        pg = fmaxf(pg1, pg2);
        dlp = dratio * ratio * inv_b;
        kl = (ratio - 1.f) - log_ratio;
        clipped = fabsf(ratio - 1.f) > clip_coef ? 1.f : 0.f;
        const float v = critic[HSUM * SP + s], ret = returns[row];
        if (clip_vloss) {
          const float ov = old_values[row], dvo = v - ov;
          const float vc = ov + fminf(fmaxf(dvo, -clip_coef), clip_coef);
          const float l1 = (v - ret) * (v - ret), l2 = (vc - ret) * (vc - ret);
          const bool v_in = dvo >= -clip_coef && dvo <= clip_coef;
          const float g1 = 2.f * (v - ret), g2 = v_in ? 2.f * (vc - ret) : 0.f;
          const float dl = l1 > l2 ? g1 : l1 < l2 ? g2 : 0.5f * g1 + 0.5f * g2;
          vl = 0.5f * fmaxf(l1, l2);
          dv = vf_coef * 0.5f * dl * inv_b;
        } else {
          vl = 0.5f * (v - ret) * (v - ret);
          dv = vf_coef * (v - ret) * inv_b;
        }
      }
      const float dent = valid ? -ent_coef * inv_b : 0.f;  // d loss / d entropy
#if HEAD_GAUSSIAN
#pragma unroll
      for (int d = 0; d < A; ++d) {
        const float z = dza[d * SP + s];
        const float std = expf(params[LOG_STD_BASE + d]);
        dza[d * SP + s] = dlp * z / std;                             // d loss / d mean
        stats[(NSTATS + d) * SP + s] = dlp * (z * z - 1.f) + dent;   // d loss / d log_std
      }
#else
      o = 0;
#pragma unroll
      for (int c = 0; c < NUM_SEG; ++c) {
        const int n = seg_size(c);
        for (int k = 0; k < n; ++k) {
          const float logp = out[(o + k) * SP + s] - lse[c];
          const float p = expf(logp);
          // d log p(a) / d l_k = [k == a] - p_k;  d H / d l_k = -p_k (log p_k + H)
          const float dl = dlp * ((k == chosen[c] ? 1.f : 0.f) - p)
                         + dent * (-p * (logp + seg_ent[c]));
          dza[(o + k) * SP + s] = dl;
        }
        o += n;
      }
#endif
      dzc[s] = dv;
      stats[0 * SP + s] = pg;
      stats[1 * SP + s] = vl;
      stats[2 * SP + s] = valid ? ent : 0.f;
      stats[3 * SP + s] = kl;
      stats[4 * SP + s] = clipped;
    }
    __syncthreads();
    if (tid < NROWS) {
      float acc = 0.f;
      for (int k = 0; k < S; ++k) acc += stats[tid * SP + k];
      stat_sum[tid] += acc;
#if HEAD_GAUSSIAN
      if (tid >= NSTATS) grad[LOG_STD_BASE + tid - NSTATS] += acc;
#endif
    }
    // Backward, output layer first; gradient rows alternate between two buffers per net.
#pragma unroll
    for (int k = L; k >= 0; --k) {
      float* dza_next = (dza == smem + DZ_OFF) ? smem + DZ_OFF + HMAX * SP : smem + DZ_OFF;
      float* dzc_next = (dzc == smem + DZ_OFF + 2 * HMAX * SP) ? smem + DZ_OFF + 3 * HMAX * SP
                                                                : smem + DZ_OFF + 2 * HMAX * SP;
      weight_grad(grad + ACTOR_BASE + layer_offset(k, A), in_size(k), out_size(k, A), dza,
                  layer_in_rows(x, actor, k), tid);
      weight_grad(grad + CRITIC_BASE + layer_offset(k, 1), in_size(k), out_size(k, 1), dzc,
                  layer_in_rows(x, critic, k), tid);
      if (k > 0) {
        backward_layer(params + ACTOR_BASE + layer_offset(k, A), in_size(k), out_size(k, A),
                       dza, layer_in_rows(x, actor, k), dza_next, s, g);
        backward_layer(params + CRITIC_BASE + layer_offset(k, 1), in_size(k), out_size(k, 1),
                       dzc, layer_in_rows(x, critic, k), dzc_next, s, g);
      }
      __syncthreads();
      dza = dza_next;
      dzc = dzc_next;
    }
  }
  __syncthreads();
  float* out_grads = partial_grads + (int64_t)blockIdx.x * NUM_PARAMS;
  for (int p = tid; p < NUM_PARAMS; p += T) out_grads[p] = grad[p];
  for (int r = tid; r < NROWS; r += T) partial_stats[blockIdx.x * NROWS + r] = stat_sum[r];
}

// grad[p] = sum over blocks of partial_grads (block order); sumsq[blockIdx.x] = this
// block's sum of grad^2. Block 0 also folds the minibatch's mean statistics into totals:
// [loss, policy loss, value loss, entropy, approx kl, clip fraction] (+=).
extern "C" __global__ void ppo_reduce_grads(const float* __restrict__ partial_grads,
                                            const float* __restrict__ partial_stats,
                                            int blocks, float inv_b, float ent_coef,
                                            float vf_coef, float* __restrict__ grad,
                                            float* __restrict__ sumsq,
                                            float* __restrict__ totals) {
  __shared__ float part[256];
  const int tid = threadIdx.x, p = blockIdx.x * 256 + tid;
  float v = 0.f;
  if (p < NUM_PARAMS) {
    for (int b = 0; b < blocks; ++b) v += partial_grads[(int64_t)b * NUM_PARAMS + p];
    grad[p] = v;
  }
  part[tid] = v * v;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (tid < w) part[tid] += part[tid + w];
    __syncthreads();
  }
  if (tid == 0) sumsq[blockIdx.x] = part[0];
  if (blockIdx.x == 0) {
    __syncthreads();
    if (tid < NSTATS) {
      float acc = 0.f;
      for (int b = 0; b < blocks; ++b) acc += partial_stats[b * NROWS + tid];
      part[tid] = acc * inv_b;
    }
    __syncthreads();
    if (tid == 0) {
      const float pg = part[0], vl = part[1], ent = part[2];
      totals[0] += pg - ent_coef * ent + vf_coef * vl;
      totals[1] += pg;
      totals[2] += vl;
      totals[3] += ent;
      totals[4] += part[3];
      totals[5] += part[4];
    }
  }
}

// Gradient clipping by the global norm (torch.nn.utils.clip_grad_norm_'s rule):
// grad *= min(max_norm / (norm + 1e-6), 1), norm = sqrt(sum of sumsq[0..n)).
extern "C" __global__ void clip_grads(float* __restrict__ grad, const float* __restrict__ sumsq,
                                      int n, float max_norm) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= NUM_PARAMS) return;
  float total = 0.f;
  for (int k = 0; k < n; ++k) total += sumsq[k];
  const float coef = fminf(max_norm / (sqrtf(total) + 1e-6f), 1.f);
  grad[p] *= coef;
}

// Roll-out step: sample actions for obs (n, D) and store obs, action and log-prob.
// noise: (n, A) uniform in [0, 1) (categorical: Gumbel-max) or standard normal (Box).
// env_actions: the actions for the env (Box: clipped to [low, high] when bounded).
extern "C" __global__ void __launch_bounds__(T) ppo_act(
    const float* __restrict__ params, const float* __restrict__ obs, int n,
    const float* __restrict__ noise, const float* __restrict__ norm_mean,
    const float* __restrict__ norm_var, const float* __restrict__ low,
    const float* __restrict__ high, int bounded, float* __restrict__ obs_out,
    void* __restrict__ actions_out, float* __restrict__ log_probs_out,
    void* __restrict__ env_actions) {
  extern __shared__ float smem[];
  const int tid = threadIdx.x, s = tid % S, g = tid / S;
  int* rows = reinterpret_cast<int*>(smem + DZ_OFF);
  const int tiles = (n + S - 1) / S;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    __syncthreads();
    if (tid < S) rows[tid] = tile * S + tid < n ? tile * S + tid : -1;
    __syncthreads();
    for (int e = tid; e < D * S; e += T) {  // raw observations into storage
      const int i = e / S, k = e - i * S;
      if (rows[k] >= 0) obs_out[(int64_t)rows[k] * D + i] = obs[(int64_t)rows[k] * D + i];
    }
    load_tile(obs, rows, norm_mean, norm_var, smem + X_OFF, tid);
    __syncthreads();
    forward_nets<true, false>(params, smem, s, g);
    if (tid < S && rows[s] >= 0) {
      const int64_t row = rows[s];
      const float* out = smem + ACTOR_OFF + HSUM * SP;
      const float* u = noise + row * A;
      float lp = 0.f;
#if HEAD_GAUSSIAN
      float* act = static_cast<float*>(actions_out);
      float* env = static_cast<float*>(env_actions);
#pragma unroll
      for (int d = 0; d < A; ++d) {
        const float log_std = params[LOG_STD_BASE + d];
        const float mu = out[d * SP + s];
        const float a = mu + u[d] * expf(log_std);
        const float z = (a - mu) / expf(log_std);
        lp += -0.5f * z * z - log_std - LOG_SQRT_2PI;
        act[row * A + d] = a;
        // NaN stays NaN (fmaxf/fminf would drop it): the env reports it as invalid.
        env[row * A + d] = bounded && a == a ? fminf(fmaxf(a, low[d]), high[d]) : a;
      }
#else
      int64_t* act = static_cast<int64_t*>(actions_out);
      int o = 0;
#pragma unroll
      for (int c = 0; c < NUM_SEG; ++c) {
        const int m = seg_size(c);
        int best = 0;
        bool nan = false;
        float best_score = -3.402823466e+38f, mx = out[o * SP + s];
        for (int k = 0; k < m; ++k) {
          const float l = out[(o + k) * SP + s];
          nan |= l != l;
          mx = fmaxf(mx, l);
          const float uk = fmaxf(u[o + k], 1.17549435e-38f);
          const float score = l - logf(-logf(uk));
          if (score > best_score) { best_score = score; best = k; }
        }
        float sum = 0.f;
        for (int k = 0; k < m; ++k) sum += expf(out[(o + k) * SP + s] - mx);
        lp += out[(o + best) * SP + s] - (mx + logf(sum));
        // A NaN logit (a diverged network) gives an out-of-range action, which the env
        // reports as invalid, like a NaN Box action.
        act[row * NUM_SEG + c] = (nan ? -1 : (int64_t)best) + seg_start(c);
        o += m;
      }
#endif
      log_probs_out[row] = lp;
    }
  }
}

// values[r] = V(obs[r]) for r < n (critic forward only).
extern "C" __global__ void __launch_bounds__(T) mlp_values(
    const float* __restrict__ params, const float* __restrict__ obs, int n,
    const float* __restrict__ norm_mean, const float* __restrict__ norm_var,
    float* __restrict__ values) {
  extern __shared__ float smem[];
  const int tid = threadIdx.x, s = tid % S, g = tid / S;
  int* rows = reinterpret_cast<int*>(smem + DZ_OFF);
  const int tiles = (n + S - 1) / S;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    __syncthreads();
    if (tid < S) rows[tid] = tile * S + tid < n ? tile * S + tid : -1;
    __syncthreads();
    load_tile(obs, rows, norm_mean, norm_var, smem + X_OFF, tid);
    __syncthreads();
    forward_nets<false, true>(params, smem, s, g);
    if (tid < S && rows[s] >= 0) values[rows[s]] = smem[CRITIC_OFF + HSUM * SP + s];
  }
}

// GAE(lambda) over (steps, n) arrays, one thread per column, the same arithmetic as
// gpu_vecenv.train.losses.gae_advantages (so the results are identical).
extern "C" __global__ void gae_advantages(const float* __restrict__ rewards,
                                          const float* __restrict__ values,
                                          const float* __restrict__ next_values,
                                          const bool* __restrict__ terminated,
                                          const bool* __restrict__ done, int steps, int n,
                                          float gamma, float gamma_lambda,
                                          float* __restrict__ advantages,
                                          float* __restrict__ returns) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= n) return;
  float running = 0.f;
  for (int t = steps - 1; t >= 0; --t) {
    const int64_t k = (int64_t)t * n + col;
    const float not_terminated = terminated[k] ? 0.f : 1.f;
    const float not_done = done[k] ? 0.f : 1.f;
    const float delta = rewards[k] + gamma * not_terminated * next_values[k] - values[k];
    running = delta + gamma_lambda * not_done * running;
    advantages[k] = running;
    returns[k] = running + values[k];
  }
}
