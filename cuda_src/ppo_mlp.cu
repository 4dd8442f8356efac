// Fused PPO kernels for small actor-critic MLPs (host side: gpu_vecenv/train/fused.py).
//
// A minibatch step of PPO on a 64x64 MLP is ~180 small torch kernels (forward, loss,
// autograd backward, gradient clipping); here it is four: ppo_update_tiles computes the
// forward pass, the loss and its gradient for tiles of TILE samples and accumulates weight
// gradients per block; ppo_reduce_grads sums the blocks in a fixed order; clip_grads scales
// by the global norm; the optimizer (torch's fused Adam) follows. ppo_act samples actions
// during the roll-out, mlp_values computes V(obs) for GAE, gae_advantages is the backward
// scan.
//
// The layer products run on shared memory: a block copies the weights there once, keeps a
// tile's activations unit-major ([unit][sample]), and every thread computes 4 x 4 outputs
// per product (forward: 4 units x 4 samples; input gradient: 4 inputs x 4 samples; weight
// gradient: 4 units x 4 inputs summed over the tile's samples) from float4 reads: one
// shared-memory read per 8 multiply-adds.
//
// Every size is a compile-time constant (-D flags, one cubin per network shape):
//   OBS_DIM, NUM_HIDDEN (1..4), H0..H3, ACTOR_OUT (logits or means), ACTIVATION (0 tanh,
//   1 relu, 2 elu), HEAD_GAUSSIAN (1: Box, else categorical), NUM_SEG (1..8) with SEG0..7
//   (category counts) and START0..7 (the space's start), NORMALIZE_OBS, TILE (samples per
//   tile, a multiple of 8), THREADS (per block).
//
// Parameters are one flat float32 buffer in ActorCritic.parameters() order: actor layers
// (weight [out][in] row-major, then bias), critic layers, then log_std (Box). Nothing is
// atomic: every sum runs in a fixed order, so a launch is deterministic.

#include "common/stdint.cuh"

#if !defined(OBS_DIM) || !defined(NUM_HIDDEN) || !defined(ACTOR_OUT) || !defined(ACTIVATION) \
    || !defined(HEAD_GAUSSIAN) || !defined(NUM_SEG) || !defined(NORMALIZE_OBS) \
    || !defined(TILE) || !defined(THREADS)
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
constexpr int T = THREADS;     // threads per block
constexpr int ST = S / 4;      // sample quads per tile
// Row stride of activations in shared memory: a multiple of 4 floats (float4 reads) with
// an odd number of float4s, so that 8 threads reading 8 consecutive rows at one column
// hit 8 different 16-byte bank groups.
constexpr int SP = S + 4;
static_assert(S % 8 == 0, "TILE must be a multiple of 8");
static_assert(T % 32 == 0 && T >= S, "THREADS must be a multiple of 32 and >= TILE");
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
// Offset of layer k's weight within a net in the flat parameters (its bias follows the
// weight); every weight starts at a multiple of 4 floats. layer_offset(L + 1) is the
// net's padded size.
__host__ __device__ constexpr int layer_offset(int k, int out) {
  int n = 0;
  for (int j = 0; j < k; ++j) n = align4(n + in_size(j) * out_size(j, out) + out_size(j, out));
  return n;
}
// A layer's weight in shared memory: [align4(out)][wstride(in)], zero padded, then the
// bias [align4(out)]. The row stride is a multiple of 4 floats with an odd number of
// float4s (conflict-free reads of consecutive rows).
__host__ __device__ constexpr int wstride(int in) {
  return (align4(in) / 4) % 2 == 1 ? align4(in) : align4(in) + 4;
}
__host__ __device__ constexpr int shared_layer_offset(int k, int out) {
  int n = 0;
  for (int j = 0; j < k; ++j) n += align4(out_size(j, out)) * (wstride(in_size(j)) + 1);
  return n;
}
// Activation rows (padded to 4) of hidden layers < k: layer k's outputs start there.
__host__ __device__ constexpr int rows_before(int k) {
  int n = 0;
  for (int j = 0; j < k; ++j) n += align4(hidden(j));
  return n;
}

constexpr int HSUM = rows_before(L);
constexpr int ACTOR_BASE = 0;
constexpr int CRITIC_BASE = layer_offset(L + 1, A);
constexpr int LOG_STD_BASE = CRITIC_BASE + layer_offset(L + 1, 1);
constexpr int NUM_PARAMS = align4(LOG_STD_BASE + (HEAD_GAUSSIAN ? A : 0));
constexpr int ACTION_DIM = HEAD_GAUSSIAN ? A : NUM_SEG;
constexpr int NSTATS = 5;                    // policy loss, value loss, entropy, kl, clipped
constexpr int NROWS = NSTATS + (HEAD_GAUSSIAN ? A : 0);   // + per-sample log_std gradients

// Shared memory (floats, every region 16-byte aligned): the weights of both nets, the
// tile's inputs, actor and critic activations (hidden layers, then the output), the
// samples' rows; [update only:] output-layer gradient rows, per-sample statistics and
// their sums, the block's gradient sums (flat parameter layout). In the backward pass a
// hidden layer's gradient rows overwrite its activations.
constexpr int W_ACTOR = 0;
constexpr int W_CRITIC = W_ACTOR + shared_layer_offset(L + 1, A);
constexpr int X_OFF = W_CRITIC + shared_layer_offset(L + 1, 1);
constexpr int ACTOR_OFF = X_OFF + align4(D) * SP;
constexpr int CRITIC_OFF = ACTOR_OFF + (HSUM + align4(A)) * SP;
constexpr int ROWS_OFF = CRITIC_OFF + (HSUM + 4) * SP;
constexpr int DZ_OFF = ROWS_OFF + S;
constexpr int STATS_OFF = DZ_OFF + (align4(A) + 4) * SP;
constexpr int STAT_SUM_OFF = STATS_OFF + NROWS * SP;
constexpr int GRAD_OFF = STAT_SUM_OFF + align4(NROWS);
constexpr int UPDATE_SMEM_BYTES = (GRAD_OFF + NUM_PARAMS) * 4;
constexpr int FORWARD_SMEM_BYTES = DZ_OFF * 4;

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

__device__ __forceinline__ float4 load4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}
__device__ __forceinline__ void store4(float* p, float x, float y, float z, float w) {
  *reinterpret_cast<float4*>(p) = make_float4(x, y, z, w);
}
// acc[j] += c * v.j (j = x, y, z, w)
__device__ __forceinline__ void axpy4(float* acc, float c, float4 v) {
  acc[0] = fmaf(c, v.x, acc[0]);
  acc[1] = fmaf(c, v.y, acc[1]);
  acc[2] = fmaf(c, v.z, acc[2]);
  acc[3] = fmaf(c, v.w, acc[3]);
}

// Layer pointers: the weights of net NET (0 actor, 1 critic) layer k in shared memory,
// the layer's input rows and output rows.
template <int NET>
__device__ __forceinline__ float* shared_weight(float* smem, int k) {
  return NET == 0 ? smem + W_ACTOR + shared_layer_offset(k, A)
                  : smem + W_CRITIC + shared_layer_offset(k, 1);
}
template <int NET>
__device__ __forceinline__ float* input_rows(float* smem, int k) {
  return k == 0 ? smem + X_OFF : smem + (NET == 0 ? ACTOR_OFF : CRITIC_OFF) + rows_before(k - 1) * SP;
}
template <int NET>
__device__ __forceinline__ float* output_rows(float* smem, int k) {
  return smem + (NET == 0 ? ACTOR_OFF : CRITIC_OFF) + rows_before(k) * SP;
}
// Gradient rows of layer k's outputs: the output layer's own buffer, a hidden layer's
// activations (overwritten by the backward pass).
template <int NET>
__device__ __forceinline__ float* gradient_rows(float* smem, int k) {
  return k == L ? smem + DZ_OFF + (NET == 0 ? 0 : align4(A) * SP) : output_rows<NET>(smem, k);
}

// Copies net NET's weights from the flat parameters into shared memory (zero padded).
template <int NET>
__device__ __forceinline__ void load_weights(const float* __restrict__ params, float* smem,
                                             int tid) {
  constexpr int OUT = NET == 0 ? A : 1;
  const float* net = params + (NET == 0 ? ACTOR_BASE : CRITIC_BASE);
#pragma unroll
  for (int k = 0; k <= L; ++k) {
    const int n_out = out_size(k, OUT), n_in = in_size(k), rows = align4(n_out);
    const int stride = wstride(n_in);
    const float* src = net + layer_offset(k, OUT);
    float* dst = shared_weight<NET>(smem, k);
    for (int e = tid; e < rows * stride; e += T) {
      const int j = e / stride, i = e - j * stride;
      dst[e] = j < n_out && i < n_in ? src[j * n_in + i] : 0.f;
    }
    for (int j = tid; j < rows; j += T) dst[rows * stride + j] = j < n_out ? src[n_out * n_in + j] : 0.f;
  }
}

// Forward, one thread tile t: out[u][s] = act(b[u] + sum_i w[u][i] in[i][s]) for units
// u = ut + NU q (q < 4, NU = align4(N) / 4) and samples s = 4 st .. 4 st + 3. Padding units
// have zero weights and bias, so their outputs are act(0) = 0.
template <int N, int K, bool ACT>
__device__ __forceinline__ void forward_tile(int t, const float* w, const float* in,
                                             float* out) {
  constexpr int NU = align4(N) / 4, WS = wstride(K);
  const int ut = t / ST, st = t - ut * ST;
  const float* bias = w + align4(N) * WS;
  float acc[4][4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float b = bias[ut + NU * q];
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[q][j] = b;
  }
#pragma unroll 4
  for (int i = 0; i < align4(K); i += 4) {
    float4 wv[4], xv[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) wv[q] = load4(w + (ut + NU * q) * WS + i);
#pragma unroll
    for (int r = 0; r < 4; ++r) xv[r] = load4(in + (i + r) * SP + 4 * st);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      axpy4(acc[q], wv[q].x, xv[0]);
      axpy4(acc[q], wv[q].y, xv[1]);
      axpy4(acc[q], wv[q].z, xv[2]);
      axpy4(acc[q], wv[q].w, xv[3]);
    }
  }
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    float* o = out + (ut + NU * q) * SP + 4 * st;
    if (ACT)
      store4(o, activate(acc[q][0]), activate(acc[q][1]), activate(acc[q][2]),
             activate(acc[q][3]));
    else
      store4(o, acc[q][0], acc[q][1], acc[q][2], acc[q][3]);
  }
}

// Input gradient, one thread tile t: a[i][s] <- act'(a[i][s]) * sum_u w[u][i] dz[u][s] for
// inputs i = 4 it .. 4 it + 3 and samples s = 4 st .. 4 st + 3, in place (each thread
// reads only the activations it overwrites).
template <int N, int K>
__device__ __forceinline__ void backward_tile(int t, const float* w, const float* dz,
                                              float* a) {
  constexpr int WS = wstride(K);
  const int it = t / ST, st = t - it * ST;
  float acc[4][4];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[r][j] = 0.f;
#pragma unroll 4
  for (int u = 0; u < N; ++u) {
    const float4 wv = load4(w + u * WS + 4 * it);
    const float4 dv = load4(dz + u * SP + 4 * st);
    axpy4(acc[0], wv.x, dv);
    axpy4(acc[1], wv.y, dv);
    axpy4(acc[2], wv.z, dv);
    axpy4(acc[3], wv.w, dv);
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    float* p = a + (4 * it + r) * SP + 4 * st;
    const float4 av = load4(p);
    store4(p, acc[r][0] * activation_grad(av.x), acc[r][1] * activation_grad(av.y),
           acc[r][2] * activation_grad(av.z), acc[r][3] * activation_grad(av.w));
  }
}

// Weight gradient, one thread tile t: grad[u][i] += sum_s dz[u][s] in[i][s] for units
// u = ut + NU q and inputs i = it + NI r (q, r < 4), summed over the tile's samples in
// order. Padding units and inputs are computed and dropped.
template <int N, int K>
__device__ __forceinline__ void weight_grad_tile(int t, float* grad, const float* dz,
                                                 const float* in) {
  constexpr int NU = align4(N) / 4, NI = align4(K) / 4;
  const int ut = t / NI, it = t - ut * NI;
  float acc[4][4];
#pragma unroll
  for (int q = 0; q < 4; ++q)
#pragma unroll
    for (int r = 0; r < 4; ++r) acc[q][r] = 0.f;
#pragma unroll 2
  for (int s = 0; s < S; s += 4) {
    float4 dv[4], xv[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) dv[q] = load4(dz + (ut + NU * q) * SP + s);
#pragma unroll
    for (int r = 0; r < 4; ++r) xv[r] = load4(in + (it + NI * r) * SP + s);
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        acc[q][r] = fmaf(dv[q].w, xv[r].w, fmaf(dv[q].z, xv[r].z,
                    fmaf(dv[q].y, xv[r].y, fmaf(dv[q].x, xv[r].x, acc[q][r]))));
  }
#pragma unroll
  for (int q = 0; q < 4; ++q)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int u = ut + NU * q, i = it + NI * r;
      if (u < N && i < K) grad[u * K + i] += acc[q][r];
    }
}

// Bias gradient of unit u: grad_bias[u] += sum_s dz[u][s] (in order).
__device__ __forceinline__ void bias_grad(int u, float* grad_bias, const float* dz) {
  float acc = 0.f;
  for (int s = 0; s < S; s += 4) {
    const float4 d = load4(dz + u * SP + s);
    acc += d.x;
    acc += d.y;
    acc += d.z;
    acc += d.w;
  }
  grad_bias[u] += acc;
}

// Layer k's forward pass for the nets selected (both share the block's threads).
template <int k, bool ACTOR, bool CRITIC>
__device__ __forceinline__ void forward_layer(float* smem, int tid) {
  constexpr int K = in_size(k), NA = out_size(k, A), NC = out_size(k, 1);
  constexpr int TA = ACTOR ? align4(NA) / 4 * ST : 0, TC = CRITIC ? align4(NC) / 4 * ST : 0;
  for (int t = tid; t < TA + TC; t += T) {
    if (t < TA)
      forward_tile<NA, K, (k < L)>(t, shared_weight<0>(smem, k), input_rows<0>(smem, k),
                                   output_rows<0>(smem, k));
    else
      forward_tile<NC, K, (k < L)>(t - TA, shared_weight<1>(smem, k), input_rows<1>(smem, k),
                                   output_rows<1>(smem, k));
  }
}

template <int k, bool ACTOR, bool CRITIC>
__device__ __forceinline__ void forward_from(float* smem, int tid) {
  forward_layer<k, ACTOR, CRITIC>(smem, tid);
  __syncthreads();
  if constexpr (k < L) forward_from<k + 1, ACTOR, CRITIC>(smem, tid);
}

// Layer k's weight and bias gradients (both nets), then, for k > 0, the gradient of its
// inputs in place of their activations (after a barrier: the weight gradient reads them).
template <int k>
__device__ __forceinline__ void backward_from(float* smem, float* grad, int tid) {
  constexpr int K = in_size(k), NA = out_size(k, A), NC = out_size(k, 1);
  constexpr int TA = align4(NA) / 4 * (align4(K) / 4), TC = align4(NC) / 4 * (align4(K) / 4);
  float* grad_a = grad + ACTOR_BASE + layer_offset(k, A);
  float* grad_c = grad + CRITIC_BASE + layer_offset(k, 1);
  for (int t = tid; t < TA + TC + NA + NC; t += T) {
    if (t < TA)
      weight_grad_tile<NA, K>(t, grad_a, gradient_rows<0>(smem, k), input_rows<0>(smem, k));
    else if (t < TA + TC)
      weight_grad_tile<NC, K>(t - TA, grad_c, gradient_rows<1>(smem, k),
                              input_rows<1>(smem, k));
    else if (t < TA + TC + NA)
      bias_grad(t - TA - TC, grad_a + NA * K, gradient_rows<0>(smem, k));
    else
      bias_grad(t - TA - TC - NA, grad_c + NC * K, gradient_rows<1>(smem, k));
  }
  __syncthreads();
  if constexpr (k > 0) {
    constexpr int BT = align4(K) / 4 * ST;
    for (int t = tid; t < 2 * BT; t += T) {
      if (t < BT)
        backward_tile<NA, K>(t, shared_weight<0>(smem, k), gradient_rows<0>(smem, k),
                             input_rows<0>(smem, k));
      else
        backward_tile<NC, K>(t - BT, shared_weight<1>(smem, k), gradient_rows<1>(smem, k),
                             input_rows<1>(smem, k));
    }
    __syncthreads();
    backward_from<k - 1>(smem, grad, tid);
  }
}

// Loads the tile's observations (normalized) into x [align4(D)][SP]; rows[s] is the
// sample's row, -1 past the end (its inputs are zeros, so nothing non-finite enters the
// sums); padding inputs are zeros.
__device__ __forceinline__ void load_tile(const float* __restrict__ obs, const int* rows,
                                          const float* __restrict__ norm_mean,
                                          const float* __restrict__ norm_var, float* x,
                                          int tid) {
  for (int e = tid; e < align4(D) * S; e += T) {
    const int i = e / S, s = e - i * S;
    const int row = rows[s];
    float v = row >= 0 && i < D ? obs[(int64_t)row * D + i] : 0.f;
#if NORMALIZE_OBS
    if (row >= 0 && i < D) {
      v = (v - norm_mean[i]) * rsqrtf(norm_var[i] + 1e-8f);
      v = fminf(fmaxf(v, -10.f), 10.f);
    }
#endif
    x[i * SP + s] = v;
  }
}

}  // namespace

// Layout facts for the host: parameter count, shared bytes of the update and forward
// kernels, tile, threads per block, action components.
__device__ int ppo_mlp_layout[6] = {NUM_PARAMS, UPDATE_SMEM_BYTES,
                                    FORWARD_SMEM_BYTES, S, T, ACTION_DIM};

// The sum of v over a block of STATS_THREADS threads, returned to every thread (fixed
// order: warp shuffles, then the warps' sums).
constexpr int STATS_THREADS = 1024;
__device__ __forceinline__ float block_sum(float v, float* part) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = part[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) part[32] = v;
  }
  __syncthreads();
  const float total = part[32];
  __syncthreads();  // part is free again
  return total;
}

// Per minibatch: mean and unbiased std of advantages[order[mb * size + k]], k < size.
// One block of STATS_THREADS threads per minibatch; stats[2 mb], stats[2 mb + 1].
extern "C" __global__ void __launch_bounds__(STATS_THREADS) advantage_stats(
    const float* __restrict__ advantages, const int64_t* __restrict__ order, int size,
    float* __restrict__ stats) {
  __shared__ float part[33];
  const int mb = blockIdx.x, tid = threadIdx.x;
  const int64_t* idx = order + (int64_t)mb * size;
  float sum = 0.f;
#pragma unroll 4
  for (int k = tid; k < size; k += STATS_THREADS) sum += advantages[idx[k]];
  const float mean = block_sum(sum, part) / (float)size;
  float sq = 0.f;
#pragma unroll 4
  for (int k = tid; k < size; k += STATS_THREADS) {
    const float d = advantages[idx[k]] - mean;
    sq += d * d;
  }
  const float var = block_sum(sq, part) / (float)(size - 1);
  if (tid == 0) {
    stats[2 * mb] = mean;
    stats[2 * mb + 1] = sqrtf(var);
  }
}

// Forward, PPO loss and backward for the minibatch rows order[start + k], k < size.
// Blocks loop over tiles; each writes its gradient sums (NUM_PARAMS floats) and per-sample
// statistic sums (NROWS floats) to partial_grads / partial_stats at its block index.
// adv_stats: this minibatch's (mean, std) from advantage_stats.
extern "C" __global__ void __launch_bounds__(T, 1) ppo_update_tiles(
    const float* __restrict__ params, const float* __restrict__ obs,
    const void* __restrict__ actions, const float* __restrict__ old_log_probs,
    const float* __restrict__ advantages, const float* __restrict__ returns,
    const float* __restrict__ old_values, const int64_t* __restrict__ order, int start,
    int size, const float* __restrict__ adv_stats, const float* __restrict__ norm_mean,
    const float* __restrict__ norm_var, float clip_coef, float ent_coef, float vf_coef,
    int clip_vloss, int norm_adv, float* __restrict__ partial_grads,
    float* __restrict__ partial_stats) {
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, s = tid;
  float* x = smem + X_OFF;
  float* actor = smem + ACTOR_OFF;
  float* critic = smem + CRITIC_OFF;
  float* dza = smem + DZ_OFF;                   // actor output-layer gradient rows
  float* dzc = smem + DZ_OFF + align4(A) * SP;  // critic output-layer gradient row
  float* grad = smem + GRAD_OFF;
  float* stats = smem + STATS_OFF;
  float* stat_sum = smem + STAT_SUM_OFF;
  int* rows = reinterpret_cast<int*>(smem + ROWS_OFF);
  const float inv_b = 1.f / (float)size;
  const float adv_mean = norm_adv ? adv_stats[0] : 0.f;
  const float adv_scale = norm_adv ? adv_stats[1] + 1e-8f : 1.f;

  load_weights<0>(params, smem, tid);
  load_weights<1>(params, smem, tid);
  // Zeros: gradient sums, statistics sums, and the output gradient rows (their padding
  // rows are read, never written).
  for (int p = tid; p < GRAD_OFF + NUM_PARAMS - DZ_OFF; p += T) smem[DZ_OFF + p] = 0.f;
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
    forward_from<0, true, true>(smem, tid);

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
    backward_from<L>(smem, grad, tid);  // output layer first
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
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, s = tid;
  int* rows = reinterpret_cast<int*>(smem + ROWS_OFF);
  load_weights<0>(params, smem, tid);
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
    forward_from<0, true, false>(smem, tid);
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
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, s = tid;
  int* rows = reinterpret_cast<int*>(smem + ROWS_OFF);
  load_weights<1>(params, smem, tid);
  const int tiles = (n + S - 1) / S;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    __syncthreads();
    if (tid < S) rows[tid] = tile * S + tid < n ? tile * S + tid : -1;
    __syncthreads();
    load_tile(obs, rows, norm_mean, norm_var, smem + X_OFF, tid);
    __syncthreads();
    forward_from<0, false, true>(smem, tid);
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
