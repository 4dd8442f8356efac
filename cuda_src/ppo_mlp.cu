// Fused PPO kernels for small actor-critic MLPs (host side: gpu_vecenv/train/ppo_mlp_kernels.py).
//
// A minibatch step of PPO on a 64x64 MLP is ~180 small torch kernels (forward, loss,
// autograd backward, gradient clipping); here it is four: ppo_update_tiles computes the
// forward pass, the loss and its gradient for tiles of kTile samples and accumulates weight
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
// Every size is a compile-time constant (-D flags from ppo_mlp_kernels.compile_flags, one cubin per
// network shape): OBS_DIM; NUM_HIDDEN (1..4) and H0..H3 (0 past NUM_HIDDEN); ACTOR_OUT
// (logits or means); ACTIVATION (0 tanh, 1 relu, 2 elu); HEAD_GAUSSIAN (1: Box, 0:
// categorical); NUM_SEG (1..8) with SEG0..7 (category counts) and START0..7 (the space's
// start), 0 past NUM_SEG; NORMALIZE_OBS; TILE (samples per tile, a multiple of 8); and the
// block sizes, which the host launches with: THREADS (the tile kernels), REDUCE_THREADS
// (ppo_reduce_grads, clip_grads, gae_advantages) and STATS_THREADS (advantage_stats), and
// REDUCE_SLICES (ppo_reduce_grads' parameters per block: REDUCE_THREADS / REDUCE_SLICES);
// MMA_PRECISION: how the hidden layers' products run (below).
//
// Products whose sizes split into a warp's 16 x 32 blocks (those between hidden layers of
// 32, 64, ... units: 64x64's nearly all the arithmetic) run on tensor cores where the GPU
// has TF32 ones (sm_80 and later): MMA_PRECISION 3 splits every float into two TF32 parts
// and sums three products (big x big, big x small, small x big; each operand to ~2^-21 and
// the dropped small x small term ~2^-20 of its size: float32-like accuracy), 1 uses one
// TF32 product (10-bit mantissas, as torch's matmul_precision "high"), 0 the float32 FMAs
// below on every GPU. Older GPUs, and the other products, use the FMAs.
//
// Parameters are one flat float32 buffer in ActorCritic.parameters() order: actor layers
// (weight [out][in] row-major, then bias), critic layers, then log_std (Box). Nothing is
// atomic: every sum runs in a fixed order, so a launch is deterministic.

#include "common/stdint.cuh"

#if !defined(OBS_DIM) || !defined(NUM_HIDDEN) || !defined(H0) || !defined(H1) \
    || !defined(H2) || !defined(H3) || !defined(ACTOR_OUT) || !defined(ACTIVATION) \
    || !defined(HEAD_GAUSSIAN) || !defined(NUM_SEG) || !defined(SEG7) || !defined(START7) \
    || !defined(NORMALIZE_OBS) || !defined(TILE) || !defined(THREADS) \
    || !defined(REDUCE_THREADS) || !defined(REDUCE_SLICES) || !defined(STATS_THREADS) \
    || !defined(MMA_PRECISION)
#error "ppo_mlp.cu needs its sizes as -D flags (see gpu_vecenv/train/ppo_mlp_kernels.py)"
#endif

namespace {

constexpr int kObsDim = OBS_DIM;
constexpr int kNumHidden = NUM_HIDDEN;  // layers 0 .. kNumHidden - 1; layer kNumHidden: output
constexpr int kActorOut = ACTOR_OUT;    // logits (categorical) or means (Gaussian)
constexpr bool kGaussianHead = HEAD_GAUSSIAN != 0;
constexpr int kNumSegments = NUM_SEG;   // categorical: one per MultiDiscrete dimension
constexpr int kTile = TILE;             // samples per tile
constexpr int kThreads = THREADS;       // threads per block of the tile kernels
constexpr int kTileQuads = kTile / 4;   // sample quads per tile
// Threads per block of ppo_reduce_grads (its tree sum), clip_grads and gae_advantages.
constexpr int kReduceThreads = REDUCE_THREADS;
static_assert(kReduceThreads >= 32 && (kReduceThreads & (kReduceThreads - 1)) == 0,
              "REDUCE_THREADS must be a power of two (a tree sum)");
// Row stride of activations in shared memory: a multiple of 4 floats (float4 reads) with
// an odd number of float4s, so that 8 threads reading 8 consecutive rows at one column
// hit 8 different 16-byte bank groups.
constexpr int kRowStride = kTile + 4;
static_assert(kTile % 8 == 0, "TILE must be a multiple of 8");
static_assert(kThreads % 32 == 0, "THREADS must be a multiple of 32");

__host__ __device__ constexpr int hidden(int k) {
  return k == 0 ? H0 : k == 1 ? H1 : k == 2 ? H2 : H3;
}
// Layer k of a net maps in_size(k) -> out_size(k, out); layer kNumHidden is the output layer.
__host__ __device__ constexpr int in_size(int k) { return k == 0 ? kObsDim : hidden(k - 1); }
__host__ __device__ constexpr int out_size(int k, int out) {
  return k == kNumHidden ? out : hidden(k);
}
__host__ __device__ constexpr int align4(int n) { return (n + 3) / 4 * 4; }
// Offset of layer k's weight within a net in the flat parameters (its bias follows the
// weight); every weight starts at a multiple of 4 floats. layer_offset(kNumHidden + 1) is
// the net's padded size.
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

constexpr int kHiddenRows = rows_before(kNumHidden);
constexpr int kActorBase = 0;
constexpr int kCriticBase = layer_offset(kNumHidden + 1, kActorOut);
constexpr int kLogStdBase = kCriticBase + layer_offset(kNumHidden + 1, 1);
constexpr int kNumParams = align4(kLogStdBase + (kGaussianHead ? kActorOut : 0));
constexpr int kActionDim = kGaussianHead ? kActorOut : kNumSegments;  // per stored action
constexpr int kNumStats = 5;  // per sample: policy loss, value loss, entropy, kl, clipped
// Rows of per-sample statistics: the kNumStats, then (Gaussian) the log_std gradients.
constexpr int kStatRows = kNumStats + (kGaussianHead ? kActorOut : 0);

// Shared memory (floats, every region 16-byte aligned): the weights of both nets, the
// tile's inputs, actor and critic activations (hidden layers, then the output), the
// samples' rows; [update only:] output-layer gradient rows, per-sample statistics and
// their sums, the block's gradient sums (flat parameter layout). In the backward pass a
// hidden layer's gradient rows overwrite its activations.
constexpr int kActorWeightsAt = 0;
constexpr int kCriticWeightsAt =
    kActorWeightsAt + shared_layer_offset(kNumHidden + 1, kActorOut);
constexpr int kInputsAt = kCriticWeightsAt + shared_layer_offset(kNumHidden + 1, 1);
constexpr int kActorRowsAt = kInputsAt + align4(kObsDim) * kRowStride;
constexpr int kCriticRowsAt = kActorRowsAt + (kHiddenRows + align4(kActorOut)) * kRowStride;
constexpr int kSampleRowsAt = kCriticRowsAt + (kHiddenRows + 4) * kRowStride;
constexpr int kOutputGradsAt = kSampleRowsAt + kTile;
constexpr int kStatsAt = kOutputGradsAt + (align4(kActorOut) + 4) * kRowStride;
constexpr int kStatSumsAt = kStatsAt + kStatRows * kRowStride;
constexpr int kGradsAt = kStatSumsAt + align4(kStatRows);
constexpr int kUpdateSharedBytes = (kGradsAt + kNumParams) * 4;
constexpr int kForwardSharedBytes = kOutputGradsAt * 4;

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
  return NET == 0 ? smem + kActorWeightsAt + shared_layer_offset(k, kActorOut)
                  : smem + kCriticWeightsAt + shared_layer_offset(k, 1);
}
template <int NET>
__device__ __forceinline__ float* input_rows(float* smem, int k) {
  if (k == 0) return smem + kInputsAt;
  return smem + (NET == 0 ? kActorRowsAt : kCriticRowsAt) + rows_before(k - 1) * kRowStride;
}
template <int NET>
__device__ __forceinline__ float* output_rows(float* smem, int k) {
  return smem + (NET == 0 ? kActorRowsAt : kCriticRowsAt) + rows_before(k) * kRowStride;
}
// Gradient rows of layer k's outputs: the output layer's own buffer, a hidden layer's
// activations (overwritten by the backward pass).
template <int NET>
__device__ __forceinline__ float* gradient_rows(float* smem, int k) {
  if (k < kNumHidden) return output_rows<NET>(smem, k);
  return smem + kOutputGradsAt + (NET == 0 ? 0 : align4(kActorOut) * kRowStride);
}

// Copies net NET's weights from the flat parameters into shared memory (zero padded).
template <int NET>
__device__ __forceinline__ void load_weights(const float* __restrict__ params, float* smem,
                                             int tid) {
  constexpr int OUT = NET == 0 ? kActorOut : 1;
  const float* net = params + (NET == 0 ? kActorBase : kCriticBase);
#pragma unroll
  for (int k = 0; k <= kNumHidden; ++k) {
    const int n_out = out_size(k, OUT), n_in = in_size(k), rows = align4(n_out);
    const int stride = wstride(n_in);
    const float* src = net + layer_offset(k, OUT);
    float* dst = shared_weight<NET>(smem, k);
    // Eight loads in flight per thread, then their stores (one round trip to L2 per eight).
    for (int base = tid; base < rows * stride; base += 8 * kThreads) {
      float v[8];
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int e = base + q * kThreads, j = e / stride, i = e - j * stride;
        v[q] = e < rows * stride && j < n_out && i < n_in ? src[j * n_in + i] : 0.f;
      }
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        if (base + q * kThreads < rows * stride) dst[base + q * kThreads] = v[q];
      }
    }
    for (int j = tid; j < rows; j += kThreads) {
      dst[rows * stride + j] = j < n_out ? src[n_out * n_in + j] : 0.f;
    }
  }
}

// Forward, one thread tile t: out[u][s] = act(b[u] + sum_i w[u][i] in[i][s]) for units
// u = ut + NU q (q < 4, NU = align4(N) / 4) and samples s = 4 st .. 4 st + 3. Padding units
// have zero weights and bias, so their outputs are act(0) = 0.
template <int N, int K, bool ACT>
__device__ __forceinline__ void forward_tile(int t, const float* w, const float* in,
                                             float* out) {
  constexpr int NU = align4(N) / 4, WS = wstride(K);
  const int ut = t / kTileQuads, st = t - ut * kTileQuads;
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
    for (int r = 0; r < 4; ++r) xv[r] = load4(in + (i + r) * kRowStride + 4 * st);
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
    float* o = out + (ut + NU * q) * kRowStride + 4 * st;
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
  const int it = t / kTileQuads, st = t - it * kTileQuads;
  float acc[4][4];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[r][j] = 0.f;
#pragma unroll 4
  for (int u = 0; u < N; ++u) {
    const float4 wv = load4(w + u * WS + 4 * it);
    const float4 dv = load4(dz + u * kRowStride + 4 * st);
    axpy4(acc[0], wv.x, dv);
    axpy4(acc[1], wv.y, dv);
    axpy4(acc[2], wv.z, dv);
    axpy4(acc[3], wv.w, dv);
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    float* p = a + (4 * it + r) * kRowStride + 4 * st;
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
  for (int s = 0; s < kTile; s += 4) {
    float4 dv[4], xv[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) dv[q] = load4(dz + (ut + NU * q) * kRowStride + s);
#pragma unroll
    for (int r = 0; r < 4; ++r) xv[r] = load4(in + (it + NI * r) * kRowStride + s);
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

// Layers too narrow to give most threads a 4 x 4 tile (the output layer: 1 or 2 units; the
// first: 4 inputs) take one output per thread instead, so that a few threads do not
// serialize long loops while the rest wait at the next barrier.
__host__ __device__ constexpr bool narrow(int tiles) { return tiles < kThreads / 2; }

// Forward, one output per thread t: out[u][s] = act(b[u] + sum_i w[u][i] in[i][s]) for
// u = t / kTile (< align4(N): padding units have zero weights and bias), s = t % kTile.
template <int N, int K, bool ACT>
__device__ __forceinline__ void forward_one(int t, const float* w, const float* in,
                                            float* out) {
  constexpr int WS = wstride(K);
  const int u = t / kTile, s = t - u * kTile;
  float acc[4] = {w[align4(N) * WS + u], 0.f, 0.f, 0.f};
#pragma unroll 4
  for (int i = 0; i < align4(K); i += 4) {
    const float4 wv = load4(w + u * WS + i);
    acc[0] = fmaf(wv.x, in[i * kRowStride + s], acc[0]);
    acc[1] = fmaf(wv.y, in[(i + 1) * kRowStride + s], acc[1]);
    acc[2] = fmaf(wv.z, in[(i + 2) * kRowStride + s], acc[2]);
    acc[3] = fmaf(wv.w, in[(i + 3) * kRowStride + s], acc[3]);
  }
  const float z = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  out[u * kRowStride + s] = ACT ? activate(z) : z;
}

// Weight gradient, one weight per thread t: grad[u][i] += sum_s dz[u][s] in[i][s] for
// u = t / K, i = t % K.
template <int N, int K>
__device__ __forceinline__ void weight_grad_one(int t, float* grad, const float* dz,
                                                const float* in) {
  const int u = t / K, i = t - u * K;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
  for (int s = 0; s < kTile; s += 4) {
    const float4 d = load4(dz + u * kRowStride + s), x = load4(in + i * kRowStride + s);
    acc[0] = fmaf(d.x, x.x, acc[0]);
    acc[1] = fmaf(d.y, x.y, acc[1]);
    acc[2] = fmaf(d.z, x.z, acc[2]);
    acc[3] = fmaf(d.w, x.w, acc[3]);
  }
  grad[u * K + i] += (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// A thread's task in a layer's forward pass or weight gradient: one output (ONE, narrow
// layers) or a 4 x 4 tile of them.
template <bool ONE, int N, int K, bool ACT>
__device__ __forceinline__ void forward_by_thread(int t, const float* w, const float* in,
                                                  float* out) {
  if constexpr (ONE) forward_one<N, K, ACT>(t, w, in, out);
  else forward_tile<N, K, ACT>(t, w, in, out);
}
template <bool ONE, int N, int K>
__device__ __forceinline__ void weight_grad_by_thread(int t, float* grad, const float* dz,
                                                      const float* in) {
  if constexpr (ONE) weight_grad_one<N, K>(t, grad, dz, in);
  else weight_grad_tile<N, K>(t, grad, dz, in);
}
// Thread tasks of a layer of N outputs and K inputs over a tile's samples: forward
// outputs (FORWARD) or weights.
template <bool ONE, bool FORWARD>
__host__ __device__ constexpr int thread_tasks(int n, int k) {
  return ONE ? (FORWARD ? align4(n) * kTile : n * k)
             : align4(n) / 4 * (FORWARD ? kTileQuads : align4(k) / 4);
}

// Bias gradient of unit u: grad_bias[u] += sum_s dz[u][s] (in order).
__device__ __forceinline__ void bias_grad(int u, float* grad_bias, const float* dz) {
  float acc = 0.f;
  for (int s = 0; s < kTile; s += 4) {
    const float4 d = load4(dz + u * kRowStride + s);
    acc += d.x;
    acc += d.y;
    acc += d.z;
    acc += d.w;
  }
  grad_bias[u] += acc;
}

// -- tensor-core products --
//
// mma.sync m16n8k8 with TF32 inputs and float32 accumulation. Fragments (PTX ISA, "Matrix
// Fragments for mma.m16n8k8", .tf32), g = lane / 4, t = lane % 4: A (16 x 8) a0 (g, t),
// a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4); B (8 x 8) b0 (t, g), b1 (t + 4, g);
// C (16 x 8) c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1). Row strides
// of 4 mod 32 floats (kTile + 4, wstride) give reads whose lanes run along rows g (the
// weights in the forward pass, both operands of the weight gradient) 32 different banks;
// reads along rows t (the activations in the forward pass, both operands of the input
// gradient) meet 2-way bank conflicts. Nsight Compute counted 1.7-way on average over all
// of the update kernel's shared loads; a stride that suits one kind of read does not
// suit the other, so they stay.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && MMA_PRECISION > 0
constexpr int kMmaPrecision = MMA_PRECISION;
#else
constexpr int kMmaPrecision = 0;  // no TF32 tensor cores (or not asked for): float32 FMAs
#endif
static_assert(MMA_PRECISION == 0 || MMA_PRECISION == 1 || MMA_PRECISION == 3,
              "MMA_PRECISION is 0 (FMAs), 1 (TF32) or 3 (three TF32 products)");
constexpr int kWarps = kThreads / 32;
constexpr int kMmaBlocks = 4;  // n-blocks of 8 per warp task: a task is 16 x 32 (16 x 16
                               // tasks were 6 % slower: more fragment loads per product)
constexpr int kSampleBlocks = kTile / (8 * kMmaBlocks);  // a tile's 32-sample blocks (used
                                                         // where mma_fits)

// Whether a product of M x N outputs summed over K runs on tensor cores (every warp
// task a whole 16 x 32 block: no padding).
__host__ __device__ constexpr bool mma_fits(int m, int n, int k) {
  return kMmaPrecision > 0 && m % 16 == 0 && n % (8 * kMmaBlocks) == 0 && k % 8 == 0;
}

// The TF32 operands of a float: mma reads the top 19 bits of a 32-bit register (sign,
// exponent, 10 mantissa bits) and ignores the rest, so x's own bits are x truncated to
// TF32 (the "big" part); the "small" part x - big is exact in float32 and, truncated in
// turn, carries x's next 11 significant bits. (Rounding both to nearest with cvt.rna
// instead made a 64x64 update 27 % slower on an H200: integer work, not products.)
__device__ __forceinline__ __attribute__((unused)) uint32_t tf32_bits(float x) {
  return __float_as_uint(x);
}
__device__ __forceinline__ __attribute__((unused)) uint32_t tf32_small(float x, uint32_t big) {
  return __float_as_uint(x - __uint_as_float(big & 0xffffe000u));
}

// d += a b for one fragment.
__device__ __forceinline__ __attribute__((unused)) void mma_tf32(float (&d)[4],
                                                                 const uint32_t (&a)[4],
                                                                 uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// One warp: acc[j] += the 16 x 8 block j of A B, A(m, k) = a_at(m, k) (m < 16, k < K),
// B(k, n) = b_at(k, n) (n < 8 kMmaBlocks), summed over k in steps of 8.
template <int K, class AAt, class BAt>
__device__ __forceinline__ void warp_product(float (&acc)[kMmaBlocks][4], AAt a_at, BAt b_at) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll 2
  for (int k = 0; k < K; k += 8) {
    const float af[4] = {a_at(g, k + t), a_at(g + 8, k + t), a_at(g, k + t + 4),
                         a_at(g + 8, k + t + 4)};
    uint32_t a_big[4], a_small[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      a_big[q] = tf32_bits(af[q]);
      a_small[q] = kMmaPrecision == 3 ? tf32_small(af[q], a_big[q]) : 0u;
    }
#pragma unroll
    for (int j = 0; j < kMmaBlocks; ++j) {
      const float b0 = b_at(k + t, 8 * j + g), b1 = b_at(k + t + 4, 8 * j + g);
      const uint32_t big0 = tf32_bits(b0), big1 = tf32_bits(b1);
      if (kMmaPrecision == 3) {
        mma_tf32(acc[j], a_small, big0, big1);
        mma_tf32(acc[j], a_big, tf32_small(b0, big0), tf32_small(b1, big1));
      }
      mma_tf32(acc[j], a_big, big0, big1);
    }
  }
}

// Forward, one warp task: out[u][s] = act(b[u] + sum_i w[u][i] in[i][s]) for the 16 units
// from 16 ub and the 32 samples from 32 sb (task = ub * kSampleBlocks + sb).
template <int N, int K, bool ACT>
__device__ __forceinline__ void forward_warp(int task, const float* w, const float* in,
                                             float* out) {
  constexpr int WS = wstride(K);
  const int u0 = 16 * (task / kSampleBlocks), s0 = 8 * kMmaBlocks * (task % kSampleBlocks);
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const float* bias = w + align4(N) * WS;
  float acc[kMmaBlocks][4];
#pragma unroll
  for (int j = 0; j < kMmaBlocks; ++j) {
    acc[j][0] = acc[j][1] = bias[u0 + g];
    acc[j][2] = acc[j][3] = bias[u0 + g + 8];
  }
  warp_product<K>(acc, [&](int m, int k) { return w[(u0 + m) * WS + k]; },
                  [&](int k, int n) { return in[k * kRowStride + s0 + n]; });
#pragma unroll
  for (int j = 0; j < kMmaBlocks; ++j) {
    float* o = out + (u0 + g) * kRowStride + s0 + 8 * j + 2 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // rows g and g + 8
      o[h * 8 * kRowStride] = ACT ? activate(acc[j][2 * h]) : acc[j][2 * h];
      o[h * 8 * kRowStride + 1] = ACT ? activate(acc[j][2 * h + 1]) : acc[j][2 * h + 1];
    }
  }
}

// Input gradient, one warp task: a[i][s] <- act'(a[i][s]) * sum_u w[u][i] dz[u][s] for the
// 16 inputs from 16 ib and 32 samples from 32 sb (task = ib * kSampleBlocks + sb), in
// place (each lane rewrites only the activations it read).
template <int N, int K>
__device__ __forceinline__ void backward_warp(int task, const float* w, const float* dz,
                                              float* a) {
  constexpr int WS = wstride(K);
  const int i0 = 16 * (task / kSampleBlocks), s0 = 8 * kMmaBlocks * (task % kSampleBlocks);
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  float acc[kMmaBlocks][4] = {};
  warp_product<N>(acc, [&](int m, int k) { return w[k * WS + i0 + m]; },
                  [&](int k, int n) { return dz[k * kRowStride + s0 + n]; });
#pragma unroll
  for (int j = 0; j < kMmaBlocks; ++j) {
    float* p = a + (i0 + g) * kRowStride + s0 + 8 * j + 2 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      p[h * 8 * kRowStride] = acc[j][2 * h] * activation_grad(p[h * 8 * kRowStride]);
      p[h * 8 * kRowStride + 1] =
          acc[j][2 * h + 1] * activation_grad(p[h * 8 * kRowStride + 1]);
    }
  }
}

// Weight gradient, one warp task: grad[u][i] += sum_s dz[u][s] in[i][s] over the tile's
// samples for the 16 units from 16 ub and 32 inputs from 32 ib (task = ub * K / 32 + ib).
template <int N, int K>
__device__ __forceinline__ void weight_grad_warp(int task, float* grad, const float* dz,
                                                 const float* in) {
  constexpr int IB = K / (8 * kMmaBlocks);
  const int u0 = 16 * (task / IB), i0 = 8 * kMmaBlocks * (task % IB);
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  float acc[kMmaBlocks][4] = {};
  warp_product<kTile>(acc, [&](int m, int k) { return dz[(u0 + m) * kRowStride + k]; },
                      [&](int k, int n) { return in[(i0 + n) * kRowStride + k]; });
#pragma unroll
  for (int j = 0; j < kMmaBlocks; ++j) {
    float* gr = grad + (u0 + g) * K + i0 + 8 * j + 2 * t;
    gr[0] += acc[j][0];
    gr[1] += acc[j][1];
    gr[8 * K] += acc[j][2];
    gr[8 * K + 1] += acc[j][3];
  }
}

// Layer k's forward pass for the nets selected (both share the block's threads).
template <int k, bool ACTOR, bool CRITIC>
__device__ __forceinline__ void forward_layer(float* smem, int tid) {
  constexpr int K = in_size(k), NA = out_size(k, kActorOut), NC = out_size(k, 1);
  constexpr int TA = ACTOR ? align4(NA) / 4 * kTileQuads : 0;
  constexpr int TC = CRITIC ? align4(NC) / 4 * kTileQuads : 0;
  constexpr bool kHiddenLayer = k < kNumHidden;  // activated; the output layer is not
  if constexpr (mma_fits(NA, kTile, K) && mma_fits(NC, kTile, K)) {
    constexpr int WA = ACTOR ? NA / 16 * kSampleBlocks : 0;
    constexpr int WC = CRITIC ? NC / 16 * kSampleBlocks : 0;
    for (int w = tid / 32; w < WA + WC; w += kWarps) {
      if (w < WA)
        forward_warp<NA, K, kHiddenLayer>(w, shared_weight<0>(smem, k), input_rows<0>(smem, k),
                                          output_rows<0>(smem, k));
      else
        forward_warp<NC, K, kHiddenLayer>(w - WA, shared_weight<1>(smem, k),
                                          input_rows<1>(smem, k), output_rows<1>(smem, k));
    }
  } else {
    constexpr bool kOne = narrow(TA + TC);
    constexpr int OA = ACTOR ? thread_tasks<kOne, true>(NA, K) : 0;
    constexpr int OC = CRITIC ? thread_tasks<kOne, true>(NC, K) : 0;
    for (int t = tid; t < OA + OC; t += kThreads) {
      if (t < OA)
        forward_by_thread<kOne, NA, K, kHiddenLayer>(t, shared_weight<0>(smem, k),
                                                     input_rows<0>(smem, k),
                                                     output_rows<0>(smem, k));
      else
        forward_by_thread<kOne, NC, K, kHiddenLayer>(t - OA, shared_weight<1>(smem, k),
                                                     input_rows<1>(smem, k),
                                                     output_rows<1>(smem, k));
    }
  }
}

template <int k, bool ACTOR, bool CRITIC>
__device__ __forceinline__ void forward_from(float* smem, int tid) {
  forward_layer<k, ACTOR, CRITIC>(smem, tid);
  __syncthreads();
  if constexpr (k < kNumHidden) forward_from<k + 1, ACTOR, CRITIC>(smem, tid);
}

// Layer k's weight and bias gradients (both nets), then, for k > 0, the gradient of its
// inputs in place of their activations (after a barrier: the weight gradient reads them).
template <int k>
__device__ __forceinline__ void backward_from(float* smem, float* grad, int tid) {
  constexpr int K = in_size(k), NA = out_size(k, kActorOut), NC = out_size(k, 1);
  constexpr int TA = align4(NA) / 4 * (align4(K) / 4), TC = align4(NC) / 4 * (align4(K) / 4);
  float* grad_a = grad + kActorBase + layer_offset(k, kActorOut);
  float* grad_c = grad + kCriticBase + layer_offset(k, 1);
  if constexpr (mma_fits(NA, K, kTile) && mma_fits(NC, K, kTile)) {
    constexpr int WA = NA / 16 * (K / (8 * kMmaBlocks)), WC = NC / 16 * (K / (8 * kMmaBlocks));
    for (int w = tid / 32; w < WA + WC; w += kWarps) {
      if (w < WA)
        weight_grad_warp<NA, K>(w, grad_a, gradient_rows<0>(smem, k), input_rows<0>(smem, k));
      else
        weight_grad_warp<NC, K>(w - WA, grad_c, gradient_rows<1>(smem, k),
                                input_rows<1>(smem, k));
    }
    // the biases by the last threads (the warp tasks fill the first ones first)
    for (int t = kThreads - 1 - tid; t < NA + NC; t += kThreads) {
      if (t < NA)
        bias_grad(t, grad_a + NA * K, gradient_rows<0>(smem, k));
      else
        bias_grad(t - NA, grad_c + NC * K, gradient_rows<1>(smem, k));
    }
  } else {
    constexpr bool kOne = narrow(TA + TC);
    constexpr int OA = thread_tasks<kOne, false>(NA, K), OC = thread_tasks<kOne, false>(NC, K);
    for (int t = tid; t < OA + OC + NA + NC; t += kThreads) {
      if (t < OA)
        weight_grad_by_thread<kOne, NA, K>(t, grad_a, gradient_rows<0>(smem, k),
                                           input_rows<0>(smem, k));
      else if (t < OA + OC)
        weight_grad_by_thread<kOne, NC, K>(t - OA, grad_c, gradient_rows<1>(smem, k),
                                           input_rows<1>(smem, k));
      else if (t < OA + OC + NA)
        bias_grad(t - OA - OC, grad_a + NA * K, gradient_rows<0>(smem, k));
      else
        bias_grad(t - OA - OC - NA, grad_c + NC * K, gradient_rows<1>(smem, k));
    }
  }
  __syncthreads();
  if constexpr (k > 0) {
    if constexpr (mma_fits(K, kTile, NA) && mma_fits(K, kTile, NC)) {
      constexpr int BW = K / 16 * kSampleBlocks;
      for (int w = tid / 32; w < 2 * BW; w += kWarps) {
        if (w < BW)
          backward_warp<NA, K>(w, shared_weight<0>(smem, k), gradient_rows<0>(smem, k),
                               input_rows<0>(smem, k));
        else
          backward_warp<NC, K>(w - BW, shared_weight<1>(smem, k), gradient_rows<1>(smem, k),
                               input_rows<1>(smem, k));
      }
    } else {
      constexpr int BT = align4(K) / 4 * kTileQuads;
      for (int t = tid; t < 2 * BT; t += kThreads) {
        if (t < BT)
          backward_tile<NA, K>(t, shared_weight<0>(smem, k), gradient_rows<0>(smem, k),
                               input_rows<0>(smem, k));
        else
          backward_tile<NC, K>(t - BT, shared_weight<1>(smem, k), gradient_rows<1>(smem, k),
                               input_rows<1>(smem, k));
      }
    }
    __syncthreads();
    backward_from<k - 1>(smem, grad, tid);
  }
}

// Loads the tile's observations (normalized) into x [align4(kObsDim)][kRowStride]; rows[s] is the
// sample's row, -1 past the end (its inputs are zeros, so nothing non-finite enters the
// sums); padding inputs are zeros.
__device__ __forceinline__ void load_tile(const float* __restrict__ obs, const int* rows,
                                          const float* __restrict__ norm_mean,
                                          const float* __restrict__ norm_var, float* x,
                                          int tid) {
  for (int e = tid; e < align4(kObsDim) * kTile; e += kThreads) {
    const int i = e / kTile, s = e - i * kTile;
    const int row = rows[s];
    float v = row >= 0 && i < kObsDim ? obs[(int64_t)row * kObsDim + i] : 0.f;
#if NORMALIZE_OBS
    if (row >= 0 && i < kObsDim) {
      v = (v - norm_mean[i]) * rsqrtf(norm_var[i] + 1e-8f);
      v = fminf(fmaxf(v, -10.f), 10.f);
    }
#endif
    x[i * kRowStride + s] = v;
  }
}

// -- the PPO loss of one sample --

// Per-sample loss terms and the gradients the backward pass starts from.
struct LossTerms {
  float policy_loss, value_loss, approx_kl, clipped;
  float dlog_prob;  // d loss / d log pi(a), divided by the minibatch size
  float dvalue;     // d loss / d V, divided by the minibatch size
};

// The clipped PPO objective and the (optionally clipped) value loss of the sample in
// storage row `row`, whose new log-probability is log_prob and value *value; the gradients
// are torch's (max and clamp pass half to each side on a tie).
__device__ __forceinline__ LossTerms ppo_loss_terms(
    float log_prob, const float* value, int row, const float* __restrict__ old_log_probs,
    const float* __restrict__ advantages, const float* __restrict__ returns,
    const float* __restrict__ old_values, float adv_mean, float adv_scale, float clip_coef,
    float vf_coef, int clip_vloss, float inv_b) {
  LossTerms t;
  const float log_ratio = log_prob - old_log_probs[row];
  const float ratio = expf(log_ratio);
  const float adv = (advantages[row] - adv_mean) / adv_scale;
  const float lo = 1.f - clip_coef, hi = 1.f + clip_coef;
  const float pg1 = -adv * ratio, pg2 = -adv * fminf(fmaxf(ratio, lo), hi);
  const bool in_range = ratio >= lo && ratio <= hi;
  // torch.max's gradient: the larger input, half to each on a tie.
  const float dratio = pg1 > pg2 ? -adv
                     : pg1 < pg2 ? (in_range ? -adv : 0.f)
                                 : 0.5f * -adv + (in_range ? 0.5f * -adv : 0.f);
  t.policy_loss = fmaxf(pg1, pg2);
  t.dlog_prob = dratio * ratio * inv_b;
  t.approx_kl = (ratio - 1.f) - log_ratio;
  t.clipped = fabsf(ratio - 1.f) > clip_coef ? 1.f : 0.f;
  const float v = *value, ret = returns[row];
  if (clip_vloss) {
    const float ov = old_values[row], dvo = v - ov;
    const float vc = ov + fminf(fmaxf(dvo, -clip_coef), clip_coef);
    const float l1 = (v - ret) * (v - ret), l2 = (vc - ret) * (vc - ret);
    const bool v_in = dvo >= -clip_coef && dvo <= clip_coef;
    const float g1 = 2.f * (v - ret), g2 = v_in ? 2.f * (vc - ret) : 0.f;
    const float dl = l1 > l2 ? g1 : l1 < l2 ? g2 : 0.5f * g1 + 0.5f * g2;
    t.value_loss = 0.5f * fmaxf(l1, l2);
    t.dvalue = vf_coef * 0.5f * dl * inv_b;
  } else {
    t.value_loss = 0.5f * (v - ret) * (v - ret);
    t.dvalue = vf_coef * (v - ret) * inv_b;
  }
  return t;
}

// -- the action heads --
//
// GaussianHead<dims> (Box: means from the actor, a state-independent log_std) and
// CategoricalHead<segments> (Discrete and MultiDiscrete: one softmax per segment of the
// logits). Each gives, for sample s of a tile whose actor outputs are column s of `out`:
//   log_prob_entropy  adds log pi(a) and the entropy, and returns what output_grads needs;
//   output_grads      writes d loss / d outputs to the output-gradient rows (and, Gaussian,
//                     d loss / d log_std to the statistic rows after the kNumStats);
//   sample            draws an action from noise, stores it, returns its log-probability.
template <int kDims>
struct GaussianHead {
  static constexpr float kLogSqrt2Pi = 0.91893853320467274178f;  // log(sqrt(2 pi))
  struct Saved {};  // z = (a - mean) / std waits in the output-gradient rows

  __device__ __forceinline__ static Saved log_prob_entropy(
      const float* __restrict__ params, const float* out, const void* __restrict__ actions,
      int row, bool valid, int s, float* output_grads, float& log_prob, float& entropy) {
    const float* act = static_cast<const float*>(actions);
#pragma unroll
    for (int d = 0; d < kDims; ++d) {
      const float log_std = params[kLogStdBase + d];
      const float mu = out[d * kRowStride + s];
      const float a = valid ? act[(int64_t)row * kDims + d] : mu;
      const float z = (a - mu) / expf(log_std);
      output_grads[d * kRowStride + s] = z;  // kept for the gradient
      log_prob += -0.5f * z * z - log_std - kLogSqrt2Pi;
      entropy += 0.5f + kLogSqrt2Pi + log_std;
    }
    return {};
  }

  __device__ __forceinline__ static void output_grads(
      const float* __restrict__ params, const float*, const Saved&, float dlog_prob,
      float dentropy, int s, float* output_grads, float* stats) {
#pragma unroll
    for (int d = 0; d < kDims; ++d) {
      const float z = output_grads[d * kRowStride + s];
      const float std = expf(params[kLogStdBase + d]);
      output_grads[d * kRowStride + s] = dlog_prob * z / std;  // d loss / d mean
      stats[(kNumStats + d) * kRowStride + s] =
          dlog_prob * (z * z - 1.f) + dentropy;  // d loss / d log_std
    }
  }

  // noise: standard normal; env_actions: the action clipped to [low, high] when bounded.
  __device__ __forceinline__ static float sample(
      const float* __restrict__ params, const float* out, const float* u, int64_t row, int s,
      const float* __restrict__ low, const float* __restrict__ high, int bounded,
      void* __restrict__ actions_out, void* __restrict__ env_actions) {
    float* act = static_cast<float*>(actions_out);
    float* env = static_cast<float*>(env_actions);
    float log_prob = 0.f;
#pragma unroll
    for (int d = 0; d < kDims; ++d) {
      const float log_std = params[kLogStdBase + d];
      const float mu = out[d * kRowStride + s];
      const float a = mu + u[d] * expf(log_std);
      const float z = (a - mu) / expf(log_std);
      log_prob += -0.5f * z * z - log_std - kLogSqrt2Pi;
      act[row * kDims + d] = a;
      // NaN stays NaN (fmaxf/fminf would drop it): the env reports it as invalid.
      env[row * kDims + d] = bounded && a == a ? fminf(fmaxf(a, low[d]), high[d]) : a;
    }
    return log_prob;
  }
};

template <int kSegments>
struct CategoricalHead {
  // Category count and first value of MultiDiscrete dimension c (Discrete: c = 0).
  __host__ __device__ static constexpr int seg_size(int c) {
    return c == 0 ? SEG0 : c == 1 ? SEG1 : c == 2 ? SEG2 : c == 3 ? SEG3
         : c == 4 ? SEG4 : c == 5 ? SEG5 : c == 6 ? SEG6 : SEG7;
  }
  __host__ __device__ static constexpr int seg_start(int c) {
    return c == 0 ? START0 : c == 1 ? START1 : c == 2 ? START2 : c == 3 ? START3
         : c == 4 ? START4 : c == 5 ? START5 : c == 6 ? START6 : START7;
  }

  struct Saved {
    float log_sum_exp[kSegments];  // of each segment's logits
    float entropy[kSegments];      // of each segment's distribution
    int chosen[kSegments];         // the action's category in each segment
  };

  __device__ __forceinline__ static Saved log_prob_entropy(
      const float* __restrict__, const float* out, const void* __restrict__ actions, int row,
      bool valid, int s, float*, float& log_prob, float& entropy) {
    const int64_t* act = static_cast<const int64_t*>(actions);
    Saved saved;
    int o = 0;
#pragma unroll
    for (int c = 0; c < kSegments; ++c) {
      const int n = seg_size(c);
      float m = out[o * kRowStride + s];
      for (int k = 1; k < n; ++k) m = fmaxf(m, out[(o + k) * kRowStride + s]);
      float sum = 0.f;
      for (int k = 0; k < n; ++k) sum += expf(out[(o + k) * kRowStride + s] - m);
      saved.log_sum_exp[c] = m + logf(sum);
      float h = 0.f;
      for (int k = 0; k < n; ++k) {
        const float logp = out[(o + k) * kRowStride + s] - saved.log_sum_exp[c];
        h -= expf(logp) * logp;
      }
      saved.entropy[c] = h;
      entropy += h;
      const int a = valid ? (int)(act[(int64_t)row * kSegments + c] - seg_start(c)) : 0;
      saved.chosen[c] = a;
      log_prob += out[(o + a) * kRowStride + s] - saved.log_sum_exp[c];
      o += n;
    }
    return saved;
  }

  __device__ __forceinline__ static void output_grads(
      const float* __restrict__, const float* out, const Saved& saved, float dlog_prob,
      float dentropy, int s, float* output_grads, float*) {
    int o = 0;
#pragma unroll
    for (int c = 0; c < kSegments; ++c) {
      const int n = seg_size(c);
      for (int k = 0; k < n; ++k) {
        const float logp = out[(o + k) * kRowStride + s] - saved.log_sum_exp[c];
        const float p = expf(logp);
        // d log p(a) / d l_k = [k == a] - p_k;  d H / d l_k = -p_k (log p_k + H)
        const float dl = dlog_prob * ((k == saved.chosen[c] ? 1.f : 0.f) - p)
                       + dentropy * (-p * (logp + saved.entropy[c]));
        output_grads[(o + k) * kRowStride + s] = dl;
      }
      o += n;
    }
  }

  // noise: uniform in [0, 1) (Gumbel-max); the env takes actions_out as they are.
  __device__ __forceinline__ static float sample(
      const float* __restrict__, const float* out, const float* u, int64_t row, int s,
      const float* __restrict__, const float* __restrict__, int, void* __restrict__ actions_out,
      void* __restrict__) {
    int64_t* act = static_cast<int64_t*>(actions_out);
    float log_prob = 0.f;
    int o = 0;
#pragma unroll
    for (int c = 0; c < kSegments; ++c) {
      const int m = seg_size(c);
      int best = 0;
      bool nan = false;
      float best_score = -3.402823466e+38f, mx = out[o * kRowStride + s];
      for (int k = 0; k < m; ++k) {
        const float l = out[(o + k) * kRowStride + s];
        nan |= l != l;
        mx = fmaxf(mx, l);
        const float uk = fmaxf(u[o + k], 1.17549435e-38f);
        const float score = l - logf(-logf(uk));
        if (score > best_score) {
          best_score = score;
          best = k;
        }
      }
      float sum = 0.f;
      for (int k = 0; k < m; ++k) sum += expf(out[(o + k) * kRowStride + s] - mx);
      log_prob += out[(o + best) * kRowStride + s] - (mx + logf(sum));
      // A NaN logit (a diverged network) gives an out-of-range action, which the env
      // reports as invalid, like a NaN Box action.
      act[row * kSegments + c] = (nan ? -1 : (int64_t)best) + seg_start(c);
      o += m;
    }
    return log_prob;
  }
};

// One head per network shape: the other is never instantiated.
#if HEAD_GAUSSIAN
using Head = GaussianHead<kActorOut>;
#else
using Head = CategoricalHead<kNumSegments>;
#endif

}  // namespace

// Layout facts for the host: parameter count, shared bytes of the update and forward
// kernels, tile, threads per block, action components, and the hidden layers' products
// as compiled (kMmaPrecision: 0 where the GPU has no TF32 tensor cores).
__device__ int ppo_mlp_layout[7] = {kNumParams, kUpdateSharedBytes, kForwardSharedBytes,
                                    kTile, kThreads, kActionDim, kMmaPrecision};

// The sum over a warp of v in a fixed order (a butterfly: every lane gets the same bits).
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The sum of v over a block of STATS_THREADS threads, returned to every thread (fixed
// order: warp butterflies, then the warps' sums in order).
constexpr int kStatsThreads = STATS_THREADS;
constexpr int kStatsWarps = kStatsThreads / 32;
constexpr int kStatsPerThread = 8;  // advantages a thread of advantage_stats holds
constexpr int kStatsChunk = kStatsThreads * kStatsPerThread;  // advantages per block
static_assert(kStatsThreads % 32 == 0 && kStatsThreads <= 1024,
              "STATS_THREADS must be a multiple of 32, at most 1024");
__device__ __forceinline__ float block_sum(float v, float* part) {
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < kStatsWarps; ++w) total += part[w];
  __syncthreads();  // part is free again
  return total;
}

// Per minibatch mb and chunk c of kStatsChunk of its advantages (advantages[order[mb * size
// + k]], c kStatsChunk <= k < size): the count, mean and sum of squared deviations from it
// (two passes over values held in registers) into partials[(mb * gridDim.y + c) * 3 ..];
// advantage_stats_combine joins them. Blocks: (minibatches, chunks).
extern "C" __global__ void __launch_bounds__(kStatsThreads) advantage_stats(
    const float* __restrict__ advantages, const int64_t* __restrict__ order, int size,
    float* __restrict__ partials) {
  __shared__ float part[kStatsWarps];
  const int mb = blockIdx.x, c = blockIdx.y, tid = threadIdx.x;
  const int64_t* idx = order + (int64_t)mb * size;
  const int first = c * kStatsChunk, n = min(size - first, kStatsChunk);
  float v[kStatsPerThread];
#pragma unroll
  for (int j = 0; j < kStatsPerThread; ++j) {
    const int k = tid + j * kStatsThreads;
    v[j] = k < n ? advantages[idx[first + k]] : 0.f;
  }
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < kStatsPerThread; ++j) sum += v[j];
  const float mean = block_sum(sum, part) / (float)n;
  float sq = 0.f;
#pragma unroll
  for (int j = 0; j < kStatsPerThread; ++j) {
    const float d = tid + j * kStatsThreads < n ? v[j] - mean : 0.f;
    sq += d * d;
  }
  const float m2 = block_sum(sq, part);
  if (tid == 0) {
    float* out = partials + ((int64_t)mb * gridDim.y + c) * 3;
    out[0] = (float)n;
    out[1] = mean;
    out[2] = m2;
  }
}

// Each minibatch's chunks joined in order (Chan et al.'s pairwise update): stats[2 mb] =
// mean, stats[2 mb + 1] = unbiased std of its size advantages. One thread per minibatch.
extern "C" __global__ void advantage_stats_combine(const float* __restrict__ partials,
                                                   int chunks, int minibatches,
                                                   float* __restrict__ stats) {
  const int mb = blockIdx.x * blockDim.x + threadIdx.x;
  if (mb >= minibatches) return;
  const float* p = partials + (int64_t)mb * chunks * 3;
  float n = p[0], mean = p[1], m2 = p[2];
  for (int c = 1; c < chunks; ++c) {
    const float nb = p[3 * c], delta = p[3 * c + 1] - mean, total = n + nb;
    mean += delta * (nb / total);
    m2 += p[3 * c + 2] + delta * delta * (n * nb / total);
    n = total;
  }
  stats[2 * mb] = mean;
  stats[2 * mb + 1] = sqrtf(m2 / (n - 1.f));
}

// Forward, PPO loss and backward for the minibatch rows order[start + k], k < size.
// Blocks loop over tiles; each writes its gradient sums (kNumParams floats) and per-sample
// statistic sums (kStatRows floats) to partial_grads / partial_stats at its block index.
// adv_stats: this minibatch's (mean, std) from advantage_stats.
extern "C" __global__ void __launch_bounds__(kThreads, 1) ppo_update_tiles(
    const float* __restrict__ params, const float* __restrict__ obs,
    const void* __restrict__ actions, const float* __restrict__ old_log_probs,
    const float* __restrict__ advantages, const float* __restrict__ returns,
    const float* __restrict__ old_values, const int64_t* __restrict__ order, int start,
    int size, const float* __restrict__ adv_stats, const float* __restrict__ norm_mean,
    const float* __restrict__ norm_var, float clip_coef, float ent_coef, float vf_coef,
    int clip_vloss, int norm_adv, float* __restrict__ partial_grads,
    float* __restrict__ partial_stats) {
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x;
  float* x = smem + kInputsAt;
  float* actor = smem + kActorRowsAt;
  float* critic = smem + kCriticRowsAt;
  float* dza = smem + kOutputGradsAt;                   // actor output-layer gradient rows
  float* dzc = smem + kOutputGradsAt + align4(kActorOut) * kRowStride;  // critic's, one row
  float* grad = smem + kGradsAt;
  float* stats = smem + kStatsAt;
  float* stat_sum = smem + kStatSumsAt;
  int* rows = reinterpret_cast<int*>(smem + kSampleRowsAt);
  const float inv_b = 1.f / (float)size;
  const float adv_mean = norm_adv ? adv_stats[0] : 0.f;
  const float adv_scale = norm_adv ? adv_stats[1] + 1e-8f : 1.f;

  load_weights<0>(params, smem, tid);
  load_weights<1>(params, smem, tid);
  // Zeros: gradient sums, statistics sums, and the output gradient rows (their padding
  // rows are read, never written).
  for (int p = tid; p < kGradsAt + kNumParams - kOutputGradsAt; p += kThreads) {
    smem[kOutputGradsAt + p] = 0.f;
  }
  const int tiles = (size + kTile - 1) / kTile;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    __syncthreads();
    for (int r = tid; r < kTile; r += kThreads) {
      const int k = tile * kTile + r;
      rows[r] = k < size ? (int)order[start + k] : -1;
    }
    __syncthreads();
    load_tile(obs, rows, norm_mean, norm_var, x, tid);
    __syncthreads();
    forward_from<0, true, true>(smem, tid);

    for (int s = tid; s < kTile; s += kThreads) {
      const int row = rows[s];
      const bool valid = row >= 0;
      const float* out = actor + kHiddenRows * kRowStride;
      float lp = 0.f, ent = 0.f;
      const Head::Saved saved =
          Head::log_prob_entropy(params, out, actions, row, valid, s, dza, lp, ent);
      LossTerms loss = {};  // zeros for a row past the end
      if (valid) {
        loss = ppo_loss_terms(lp, critic + kHiddenRows * kRowStride + s, row, old_log_probs,
                              advantages, returns, old_values, adv_mean, adv_scale, clip_coef,
                              vf_coef, clip_vloss, inv_b);
      }
      const float dent = valid ? -ent_coef * inv_b : 0.f;  // d loss / d entropy
      Head::output_grads(params, out, saved, loss.dlog_prob, dent, s, dza, stats);
      dzc[s] = loss.dvalue;
      stats[0 * kRowStride + s] = loss.policy_loss;
      stats[1 * kRowStride + s] = loss.value_loss;
      stats[2 * kRowStride + s] = valid ? ent : 0.f;
      stats[3 * kRowStride + s] = loss.approx_kl;
      stats[4 * kRowStride + s] = loss.clipped;
    }
    __syncthreads();
    // Each statistic row summed by one warp (lanes, then a shuffle tree: a fixed order).
    for (int r = tid / 32; r < kStatRows; r += kWarps) {
      const int lane = tid & 31;
      float acc = 0.f;
      for (int k = lane; k < kTile; k += 32) acc += stats[r * kRowStride + k];
      for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
      if (lane == 0) {
        stat_sum[r] += acc;
        if (kGaussianHead && r >= kNumStats) grad[kLogStdBase + r - kNumStats] += acc;
      }
    }
    backward_from<kNumHidden>(smem, grad, tid);  // output layer first
  }
  __syncthreads();
  float* out_grads = partial_grads + (int64_t)blockIdx.x * kNumParams;
  for (int p = tid; p < kNumParams; p += kThreads) out_grads[p] = grad[p];
  for (int r = tid; r < kStatRows; r += kThreads) {
    partial_stats[blockIdx.x * kStatRows + r] = stat_sum[r];
  }
}

// grad[p] = sum over blocks of partial_grads; sumsq[blockIdx.x] = this block's sum of
// grad^2. A block sums kReduceParams parameters, each in kReduceSlices slices of the blocks
// (slice j: a contiguous range, in block order), then the slices in order: a fixed order,
// with kReduceSlices times the loads in flight of one thread per parameter. Block 0 also
// folds the minibatch's mean statistics into totals: [loss, policy loss, value loss,
// entropy, approx kl, clip fraction] (+=).
constexpr int kReduceSlices = REDUCE_SLICES;
constexpr int kReduceParams = kReduceThreads / kReduceSlices;
static_assert(kReduceParams % 32 == 0 && kReduceParams * kReduceSlices == kReduceThreads,
              "REDUCE_THREADS must be REDUCE_SLICES times a multiple of 32");

extern "C" __global__ void ppo_reduce_grads(const float* __restrict__ partial_grads,
                                            const float* __restrict__ partial_stats,
                                            int blocks, float inv_b, float ent_coef,
                                            float vf_coef, float* __restrict__ grad,
                                            float* __restrict__ sumsq,
                                            float* __restrict__ totals) {
  __shared__ float part[kReduceThreads];
  __shared__ float warp_sq[kReduceParams / 32], stat[kNumStats];
  const int tid = threadIdx.x, slice = tid / kReduceParams, pi = tid - slice * kReduceParams;
  const int p = blockIdx.x * kReduceParams + pi;
  const int per_slice = (blocks + kReduceSlices - 1) / kReduceSlices;
  const int first = min(blocks, slice * per_slice), last = min(blocks, first + per_slice);
  float v = 0.f;
  if (p < kNumParams) {
    // Eight loads in flight, then their sum in block order.
    const float* src = partial_grads + p;
    int b = first;
    for (; b + 8 <= last; b += 8) {
      float x[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) x[j] = src[(int64_t)(b + j) * kNumParams];
#pragma unroll
      for (int j = 0; j < 8; ++j) v += x[j];
    }
    for (; b < last; ++b) v += src[(int64_t)b * kNumParams];
  }
  part[tid] = v;
  __syncthreads();
  if (slice == 0) {
    float g = part[pi];
#pragma unroll
    for (int j = 1; j < kReduceSlices; ++j) g += part[j * kReduceParams + pi];
    if (p < kNumParams) grad[p] = g;
    const float sq = warp_sum(g * g);  // 0 past kNumParams
    if (tid % 32 == 0) warp_sq[tid / 32] = sq;
  }
  if (blockIdx.x == 0 && tid / 32 < kNumStats) {
    // statistic tid / 32 by one warp: lanes over blocks, then a butterfly
    const int r = tid / 32;
    float acc = 0.f;
    for (int b = tid % 32; b < blocks; b += 32) acc += partial_stats[b * kStatRows + r];
    acc = warp_sum(acc) * inv_b;
    if (tid % 32 == 0) stat[r] = acc;
  }
  __syncthreads();
  if (tid == 0) {
    float total = 0.f;
    for (int w = 0; w < kReduceParams / 32; ++w) total += warp_sq[w];
    sumsq[blockIdx.x] = total;
    if (blockIdx.x == 0) {
      const float pg = stat[0], vl = stat[1], ent = stat[2];
      totals[0] += pg - ent_coef * ent + vf_coef * vl;
      totals[1] += pg;
      totals[2] += vl;
      totals[3] += ent;
      totals[4] += stat[3];
      totals[5] += stat[4];
    }
  }
}

// Gradient clipping by the global norm (torch.nn.utils.clip_grad_norm_'s rule):
// grad *= min(max_norm / (norm + 1e-6), 1), norm = sqrt(sum of sumsq[0..n)) (summed by each
// warp in the same order).
extern "C" __global__ void clip_grads(float* __restrict__ grad, const float* __restrict__ sumsq,
                                      int n, float max_norm) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  float total = 0.f;
  for (int k = threadIdx.x % 32; k < n; k += 32) total += sumsq[k];
  total = warp_sum(total);
  if (p >= kNumParams) return;
  const float coef = fminf(max_norm / (sqrtf(total) + 1e-6f), 1.f);
  grad[p] *= coef;
}

// Roll-out step: sample actions for obs (n, kObsDim) and store obs, action and log-prob.
// noise: (n, kActorOut) uniform in [0, 1) (categorical: Gumbel-max) or standard normal (Box).
// env_actions: the actions for the env (Box: clipped to [low, high] when bounded).
extern "C" __global__ void __launch_bounds__(kThreads) ppo_act(
    const float* __restrict__ params, const float* __restrict__ obs, int n,
    const float* __restrict__ noise, const float* __restrict__ norm_mean,
    const float* __restrict__ norm_var, const float* __restrict__ low,
    const float* __restrict__ high, int bounded, float* __restrict__ obs_out,
    void* __restrict__ actions_out, float* __restrict__ log_probs_out,
    void* __restrict__ env_actions) {
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x;
  int* rows = reinterpret_cast<int*>(smem + kSampleRowsAt);
  load_weights<0>(params, smem, tid);
  const int tiles = (n + kTile - 1) / kTile;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    __syncthreads();
    for (int r = tid; r < kTile; r += kThreads) {
      rows[r] = tile * kTile + r < n ? tile * kTile + r : -1;
    }
    __syncthreads();
    for (int e = tid; e < kObsDim * kTile; e += kThreads) {  // raw observations into storage
      const int i = e / kTile, k = e - i * kTile;
      if (rows[k] >= 0) {
        obs_out[(int64_t)rows[k] * kObsDim + i] = obs[(int64_t)rows[k] * kObsDim + i];
      }
    }
    load_tile(obs, rows, norm_mean, norm_var, smem + kInputsAt, tid);
    __syncthreads();
    forward_from<0, true, false>(smem, tid);
    for (int s = tid; s < kTile; s += kThreads) {
      if (rows[s] < 0) continue;
      const int64_t row = rows[s];
      const float* out = smem + kActorRowsAt + kHiddenRows * kRowStride;
      const float* u = noise + row * kActorOut;
      log_probs_out[row] = Head::sample(params, out, u, row, s, low, high, bounded, actions_out,
                                        env_actions);
    }
  }
}

// values[r] = V(obs[r]) for r < n (critic forward only).
extern "C" __global__ void __launch_bounds__(kThreads) mlp_values(
    const float* __restrict__ params, const float* __restrict__ obs, int n,
    const float* __restrict__ norm_mean, const float* __restrict__ norm_var,
    float* __restrict__ values) {
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x;
  int* rows = reinterpret_cast<int*>(smem + kSampleRowsAt);
  load_weights<1>(params, smem, tid);
  const int tiles = (n + kTile - 1) / kTile;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    __syncthreads();
    for (int r = tid; r < kTile; r += kThreads) {
      rows[r] = tile * kTile + r < n ? tile * kTile + r : -1;
    }
    __syncthreads();
    load_tile(obs, rows, norm_mean, norm_var, smem + kInputsAt, tid);
    __syncthreads();
    forward_from<0, false, true>(smem, tid);
    for (int s = tid; s < kTile; s += kThreads) {
      if (rows[s] >= 0) values[rows[s]] = smem[kCriticRowsAt + kHiddenRows * kRowStride + s];
    }
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
