"""The host side of ``cuda_src/ppo_mlp.cu``: fused CUDA kernels for PPO with small MLPs
(sizes, compile flags, launches; the learner that uses them is
:class:`~gpu_vecenv.train.fused_ppo_learner.FusedPPOLearner`).

With torch ops, a PPO minibatch step on a 64x64 actor-critic is ~180 kernels (forward,
loss, autograd backward, gradient clipping) of a few microseconds each, and a roll-out
step ~50: on the GPU the update costs far more in kernel count than in arithmetic. The
kernels here do the same computation in a handful of launches:

- ``ppo_act`` (roll-out): actor forward, sampling from noise drawn by torch's generator,
  log-probability, storage writes: 1 kernel + 1 noise draw per step;
- ``mlp_values`` and ``gae_advantages`` (before the update): V of the roll-out's
  observations and final observations, then the GAE scan (the same float operations as
  :func:`gpu_vecenv.train.losses.gae_advantages`, so identical results);
- per epoch ``advantage_stats`` and ``advantage_stats_combine`` (each minibatch's advantage
  mean and std, from chunks of 2,048 joined in order), per minibatch ``ppo_update_tiles``
  (forward, loss, backward for tiles of 64 samples, 128 where a minibatch gives every
  multiprocessor two such, 32 where 64 do not fit, over shared memory: the products
  between hidden layers on TF32 tensor cores where the GPU has them
  (:data:`MMA_PRECISIONS`), the others as 4x4 register-tiled FMAs; a block's weight
  gradients accumulate there too), ``ppo_reduce_grads`` (sum of the blocks in a fixed
  order: four slices of them apart, then the slices; statistics), ``clip_grads``
  (global-norm clip), then the optimizer.

The math is the torch path's (:mod:`gpu_vecenv.train.losses`, :mod:`.distributions`,
``ActorCritic``), summed in another order: results agree to float rounding, not bit for
bit, and a fused run is deterministic (no atomics). GPU tests tie each kernel to the torch
computation.

The parameters become views into one flat buffer (``FusedPPO.flat_params``, in
:func:`kernel_parameter_order`), gradients into another, so the kernels see the whole
network as one array and the optimizer, ``state_dict`` and checkpoints work as before.
Each network shape compiles its own cubin (sizes are ``-D`` flags), cached like the env
kernels.
"""

from __future__ import annotations

import math

import torch

from gpu_vecenv.train.distributions import ActionSpec

SOURCE = "ppo_mlp"
TILES = (64, 32)
"""Samples per tile (a block's unit of work), largest first: a network runs with the
largest whose shared memory fits on the GPU."""
LARGE_TILES = (128,)
"""Tiles beyond :data:`TILES` for minibatches large enough to give every block several
(:func:`choose_tile` with ``minibatch_rows``; ``FusedPPO(tile=...)``): more samples per
barrier, fewer blocks."""
LARGE_TILE_BLOCKS = 2
"""A large tile is chosen when the minibatch has at least this many of them per
multiprocessor (on an H200, 65,536 rows: 140 -> 126 us a step with tiles of 128; 8,192
rows, one tile or less per multiprocessor: 30 -> 41 us)."""
THREADS_PER_SAMPLE = 8
"""A block is ``8 * tile`` threads, at most :data:`MAX_THREADS`: one 4x4 output tile each
in a 64x64 layer's products (both nets) where these run as FMAs; 16 warps for tensor-core
tasks of 16 x 32."""
MAX_THREADS = 512


def threads_per_block(tile: int) -> int:
    """Threads per block of the tile kernels for tiles of ``tile`` samples."""
    return min(THREADS_PER_SAMPLE * tile, MAX_THREADS)


MAX_HIDDEN_LAYERS = 4
MAX_SEGMENTS = 8
_ACTIVATIONS = {"tanh": 0, "relu": 1, "elu": 2}
_DEFAULT_SHARED_OPTIN = 227 * 1024  # sm_90 (H100, H200): where no GPU is asked
SHARED_OPTIN_KIB = {75: 64, 80: 163, 86: 99, 87: 163, 89: 99, 90: 227, 100: 227, 103: 227,
                    110: 227, 120: 99, 121: 99}
"""Shared memory a block may opt in to, by compute capability (CUDA C Programming Guide,
"Technical Specifications per Compute Capability"): sizes kernels built ahead of time
(``gpu-vecenv compile --arch``) as the trainer will size them on such a GPU."""
_NSTATS = 5
REDUCE_THREADS = 256
"""Threads per block of ``ppo_reduce_grads``, ``clip_grads`` and ``gae_advantages``: the
launches below and, as ``-DREDUCE_THREADS``, the kernels' own sizes (one number)."""
REDUCE_SLICES = 4
"""Slices of the blocks' partial sums that ``ppo_reduce_grads`` sums apart (then in
order): each of its blocks sums ``REDUCE_THREADS / REDUCE_SLICES`` parameters (launch and
``-DREDUCE_SLICES``)."""
STATS_THREADS = 256
"""Threads per block of ``advantage_stats`` (launch and ``-DSTATS_THREADS``); a block holds
:data:`STATS_PER_THREAD` advantages per thread."""
STATS_PER_THREAD = 8
"""Advantages per thread of ``advantage_stats`` (``kStatsPerThread`` in the .cu): a
minibatch's statistics come from ``ceil(size / (STATS_THREADS * STATS_PER_THREAD))``
blocks, joined by ``advantage_stats_combine``."""
MMA_PRECISIONS = {"highest": 3, "high": 1, "medium": 1}
"""``-DMMA_PRECISION`` by float32 matmul precision (``trainer.matmul_precision``): how the
products between hidden layers (those that split into a warp's 16 x 32 blocks: 32, 64, ...
units) run on GPUs with TF32 tensor cores (sm_80 and later). 3: three TF32 products of
each pair's split parts, float32-like accuracy; 1: one TF32 product (as torch's "high");
0 (not chosen by any precision): float32 FMAs, as on older GPUs, where every value
compiles to 0."""


def _wstride(n_in: int) -> int:
    """Row stride of a weight in shared memory (``wstride`` in the .cu)."""
    n = _align4(n_in)
    return n if (n // 4) % 2 == 1 else n + 4


def shared_bytes(obs_dim: int, hidden: tuple[int, ...], spec: ActionSpec,
                 tile: int = TILES[0], update: bool = True) -> int:
    """Dynamic shared memory of the update kernel (``kUpdateSharedBytes`` in the .cu), or
    with ``update=False`` of the forward kernels (``kForwardSharedBytes``)."""
    head = spec.head_size
    sp = tile + 4
    weights = 0
    for out in (head, 1):
        sizes = [obs_dim, *hidden, out]
        weights += sum(_align4(b) * (_wstride(a) + 1) for a, b in zip(sizes, sizes[1:],
                                                                          strict=False))
    hsum = sum(_align4(h) for h in hidden)
    rows = _NSTATS + (head if spec.kind == "box" else 0)
    forward = (weights + _align4(obs_dim) * sp + (hsum + _align4(head)) * sp + (hsum + 4) * sp
               + tile)
    if not update:
        return forward * 4
    params = num_parameters(obs_dim, hidden, spec)
    return (forward + (_align4(head) + 4) * sp + rows * sp + _align4(rows) + params) * 4


def _align4(n: int) -> int:
    return (n + 3) // 4 * 4


def parameter_offsets(obs_dim: int, hidden: tuple[int, ...], spec: ActionSpec
                      ) -> tuple[list[int], int]:
    """Where each parameter starts in the flat buffer (in :func:`kernel_parameter_order`)
    and the buffer's size, as ``ppo_mlp.cu`` lays them out: every weight starts at a
    multiple of 4 floats (rows load as float4); padding floats belong to no parameter."""
    offsets: list[int] = []
    position = 0
    head = spec.head_size
    for out in (head, 1):
        sizes = [obs_dim, *hidden, out]
        for a, b in zip(sizes, sizes[1:], strict=False):
            offsets += [position, position + a * b]  # weight, bias
            position = _align4(position + a * b + b)
    if spec.kind == "box":
        offsets.append(position)
        position += head
    return offsets, _align4(position)


def num_parameters(obs_dim: int, hidden: tuple[int, ...], spec: ActionSpec) -> int:
    """Floats of the flat parameter buffer (the ``ActorCritic``'s parameters + padding)."""
    return parameter_offsets(obs_dim, hidden, spec)[1]


def shared_limit(device: torch.device) -> int:
    """Bytes of shared memory a block may use on ``device`` (the opt-in maximum: 227 KiB
    on the H100/H200, 163 KiB on the A100, 99 KiB on most consumer GPUs)."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return _DEFAULT_SHARED_OPTIN
    index = device.index if device.index is not None else torch.cuda.current_device()
    from gpu_vecenv.backends import driver

    try:
        return driver.device_attribute(
            index, driver.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    except (OSError, driver.DriverError):  # the kernels cannot load either
        return int(torch.cuda.get_device_properties(index).shared_memory_per_block)


def shared_limit_of(capability: tuple[int, int]) -> int:
    """:func:`shared_limit` of a GPU of compute ``capability`` without one at hand: the
    visible GPU's if it is of that capability, else :data:`SHARED_OPTIN_KIB`'s.

    Raises:
        ValueError: an architecture that table does not know.
    """
    if torch.cuda.is_available() and torch.cuda.get_device_capability() == tuple(capability):
        return shared_limit(torch.device("cuda", torch.cuda.current_device()))
    arch = capability[0] * 10 + capability[1]
    if arch not in SHARED_OPTIN_KIB:
        raise ValueError(f"shared memory of sm_{arch} is not known; known: "
                         f"{sorted(SHARED_OPTIN_KIB)}")
    return SHARED_OPTIN_KIB[arch] * 1024


def choose_tile(obs_dim: int, hidden: tuple[int, ...], spec: ActionSpec,
                limit: int = _DEFAULT_SHARED_OPTIN, minibatch_rows: int = 0,
                multiprocessors: int = 0) -> int | None:
    """The largest of :data:`TILES` whose update kernel fits in ``limit`` bytes of shared
    memory (``None``: none does); a larger one of :data:`LARGE_TILES` where it fits too
    and minibatches of ``minibatch_rows`` give each of ``multiprocessors`` at least
    :data:`LARGE_TILE_BLOCKS` of them."""
    for tile in LARGE_TILES:
        if (minibatch_rows >= LARGE_TILE_BLOCKS * tile * multiprocessors > 0
                and shared_bytes(obs_dim, hidden, spec, tile) <= limit):
            return tile
    for tile in TILES:
        if shared_bytes(obs_dim, hidden, spec, tile) <= limit:
            return tile
    return None


def fused_blockers(algo: str, hidden: tuple[int, ...], activation: str, obs_dim: int,
                   spec: ActionSpec, device: torch.device, masked: bool = False) -> list[str]:
    """Why the fused kernels cannot run this policy (empty: they can). ``masked``: its
    slots belong to a multi-agent env whose idle rows must weigh 0, which the kernels do
    not do (the torch path does, :mod:`gpu_vecenv.train.masked`)."""
    from gpu_vecenv.backends import cuda_backend_problem

    reasons = []
    if masked:
        reasons.append("they do not mask the idle slots of a multi-agent env "
                       "(info['active']); its policies train with torch ops")
    if device.type != "cuda":
        reasons.append(f"the device is {device.type}, not cuda")
    if algo != "ppo":
        reasons.append(f"they implement PPO's update, not {algo}'s")
    if not 1 <= len(hidden) <= MAX_HIDDEN_LAYERS:
        reasons.append(f"they take 1 to {MAX_HIDDEN_LAYERS} hidden layers, not {len(hidden)}")
    if activation not in _ACTIVATIONS:
        reasons.append(f"activation {activation!r} is not one of {sorted(_ACTIVATIONS)}")
    if spec.kind != "box" and len(spec.nvec) > MAX_SEGMENTS:
        reasons.append(f"they take up to {MAX_SEGMENTS} MultiDiscrete dimensions")
    if reasons:
        return reasons
    limit = shared_limit(device)
    if choose_tile(obs_dim, hidden, spec, limit) is None:
        need = shared_bytes(obs_dim, hidden, spec, TILES[-1])
        reasons.append(f"the network needs {need // 1024} KiB of shared memory per block "
                       f"(its weights twice: values and gradients), the GPU offers "
                       f"{limit // 1024} KiB (use smaller hidden layers)")
    problem = cuda_backend_problem(device) if device.type == "cuda" else None
    if problem is not None:
        reasons.append(problem)
    return reasons


def mma_precision(matmul_precision: str | None = None) -> int:
    """``-DMMA_PRECISION`` for a float32 matmul precision (default: torch's current one)."""
    if matmul_precision is None:
        matmul_precision = torch.get_float32_matmul_precision()
    if matmul_precision not in MMA_PRECISIONS:
        raise ValueError(f"matmul precision {matmul_precision!r} is not one of "
                         f"{sorted(MMA_PRECISIONS)}")
    return MMA_PRECISIONS[matmul_precision]


def compile_flags(obs_dim: int, hidden: tuple[int, ...], activation: str,
                  spec: ActionSpec, normalize_obs: bool, tile: int = TILES[0],
                  mma: int = MMA_PRECISIONS["highest"]) -> tuple[str, ...]:
    """The ``-D`` flags that size ``ppo_mlp.cu`` for one network and tile; ``mma``: the
    hidden layers' products (:data:`MMA_PRECISIONS`; 0: float32 FMAs everywhere)."""
    if mma not in (0, 1, 3):
        raise ValueError(f"mma is 0 (float32 FMAs), 1 (TF32) or 3 (three TF32 products), "
                         f"not {mma!r}")
    def padded(values, size: int) -> list[int]:  # the .cu's arrays have fixed sizes
        return [*values, *[0] * (size - len(values))]

    box = spec.kind == "box"
    sizes = [] if box else list(spec.nvec)
    starts = [] if box else list(spec.start)
    flags = [f"-DOBS_DIM={obs_dim}", f"-DNUM_HIDDEN={len(hidden)}",
             *(f"-DH{k}={h}" for k, h in enumerate(padded(hidden, MAX_HIDDEN_LAYERS))),
             f"-DACTOR_OUT={spec.head_size}", f"-DACTIVATION={_ACTIVATIONS[activation]}",
             f"-DHEAD_GAUSSIAN={int(box)}",
             f"-DNORMALIZE_OBS={int(normalize_obs)}", f"-DTILE={tile}",
             f"-DTHREADS={threads_per_block(tile)}", f"-DREDUCE_THREADS={REDUCE_THREADS}",
             f"-DREDUCE_SLICES={REDUCE_SLICES}",
             f"-DSTATS_THREADS={STATS_THREADS}", f"-DNUM_SEG={1 if box else len(sizes)}",
             *(f"-DSEG{c}={n}" for c, n in enumerate(padded(sizes, MAX_SEGMENTS))),
             *(f"-DSTART{c}={s}" for c, s in enumerate(padded(starts, MAX_SEGMENTS))),
             f"-DMMA_PRECISION={mma}"]
    return tuple(flags)


def kernel_parameter_order(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """An ``ActorCritic``'s parameters in the kernels' order: actor layers (weight,
    bias), critic layers, then ``log_std`` (``parameters()`` yields ``log_std`` first)."""
    params = [*model.actor.parameters(), *model.critic.parameters()]
    if model.log_std is not None:
        params.append(model.log_std)
    if len(params) != len(list(model.parameters())):
        raise TypeError("the fused kernels take ActorCritic's actor, critic and log_std only")
    return params


def flatten_parameters(params: list[torch.nn.Parameter], offsets: list[int], total: int
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Make ``params`` views into one flat buffer of ``total`` floats (parameter ``k`` at
    ``offsets[k]``) and their ``.grad`` views into another; returns ``(params, grads)``.

    Parameter objects stay the same (optimizers built afterwards see them as usual) and
    in-place updates (optimizer steps, ``load_state_dict``) keep the views intact."""
    device = params[0].device
    flat = torch.zeros(total, device=device)
    grads = torch.zeros(total, device=device)
    with torch.no_grad():
        for p, offset in zip(params, offsets, strict=True):
            n = p.numel()
            flat[offset:offset + n].copy_(p.reshape(-1))
            p.data = flat[offset:offset + n].view_as(p)
            p.grad = grads[offset:offset + n].view_as(p)
    return flat, grads


class FusedPPO:
    """The fused kernels bound to one ``ActorCritic`` (which it flattens in place).

    Args:
        model: the learner's network, on a CUDA device.
        spec: its action space.
        obs_dim, hidden, activation, normalize_obs: its shape (as configured).
        tile: samples per tile, one of :data:`TILES` or :data:`LARGE_TILES` (default:
            :func:`choose_tile` for this GPU and ``minibatch_rows``).
        mma: the hidden layers' products, as :func:`compile_flags` takes it (default: by
            torch's float32 matmul precision, :func:`mma_precision`); :attr:`mma_precision`
            is what the GPU runs (0 where it has no TF32 tensor cores).
        minibatch_rows: the update's minibatch size, for the default tile (0: unknown, no
            large tile).
    """

    def __init__(self, model: torch.nn.Module, spec: ActionSpec, obs_dim: int,
                 hidden: tuple[int, ...], activation: str, normalize_obs: bool,
                 tile: int | None = None, mma: int | None = None, minibatch_rows: int = 0):
        from gpu_vecenv.backends.compiler import load_module
        from gpu_vecenv.backends.launch import Kernel

        self.model = model
        self.spec = spec
        self.obs_dim = obs_dim
        self.device = next(model.parameters()).device
        self.device_index = self.device.index if self.device.index is not None else 0
        self.parameters = kernel_parameter_order(model)
        self.offsets, total = parameter_offsets(obs_dim, hidden, spec)
        self.flat_params, self.flat_grads = flatten_parameters(self.parameters, self.offsets,
                                                               total)
        self.num_params = self.flat_params.numel()
        limit = shared_limit(self.device)
        if tile is None:
            sms = torch.cuda.get_device_properties(self.device).multi_processor_count
            tile = choose_tile(obs_dim, hidden, spec, limit, minibatch_rows, sms)
        if tile not in TILES + LARGE_TILES or shared_bytes(obs_dim, hidden, spec, tile) > limit:
            raise ValueError(f"tiles of {tile} samples: the fused kernels take "
                             f"{TILES + LARGE_TILES} within {limit // 1024} KiB of shared "
                             f"memory per block")
        self.tile, self.threads = tile, threads_per_block(tile)
        flags = compile_flags(obs_dim, hidden, activation, spec, normalize_obs, tile,
                              mma_precision() if mma is None else mma)
        with torch.cuda.device(self.device_index):
            module = load_module(SOURCE, self.device_index, extra_flags=flags)
            layout = self._read_layout(module)
        update_bytes = shared_bytes(obs_dim, hidden, spec, tile)
        forward_bytes = shared_bytes(obs_dim, hidden, spec, tile, update=False)
        action_dim = spec.head_size if spec.kind == "box" else len(spec.nvec)
        expected = (self.num_params, update_bytes, forward_bytes, tile, self.threads, action_dim)
        if layout[:-1] != expected:
            raise RuntimeError(f"ppo_mlp.cu's layout {layout} does not match this network "
                               f"({self.num_params} parameters, tile {tile})")
        self.mma_precision = layout[-1]
        props = torch.cuda.get_device_properties(self.device)
        per_sm = int(getattr(props, "shared_memory_per_multiprocessor", 228 * 1024))
        per_sm_threads = int(getattr(props, "max_threads_per_multi_processor", 2048))

        def blocks(shared: int) -> int:  # resident blocks per GPU (1 KiB reserved per block)
            fit = min(per_sm // (shared + 1024), per_sm_threads // self.threads)
            return max(1, fit) * props.multi_processor_count

        self.update_blocks = blocks(update_bytes)
        self.forward_blocks = blocks(forward_bytes)

        def kernel(name: str, fmt: str, shared: int = 0) -> Kernel:
            return Kernel(module, name, fmt, shared)

        self._update = kernel("ppo_update_tiles", "PPPPPPPPii" + "PPP" + "fff" + "ii" + "PP",
                              update_bytes)
        self._reduce = kernel("ppo_reduce_grads", "PPifffPPP")
        self._clip = kernel("clip_grads", "PPif")
        self._adv_stats = kernel("advantage_stats", "PPiP")
        self._adv_combine = kernel("advantage_stats_combine", "PiiP")
        self._adv_partials: torch.Tensor | None = None
        self._act = kernel("ppo_act", "PPiPPPPPiPPPP", forward_bytes)
        self._values = kernel("mlp_values", "PPiPPP", forward_bytes)
        self._gae = kernel("gae_advantages", "PPPPPiiffPP")
        normalizer = model.normalizer
        self._norm = (normalizer.mean.data_ptr(), normalizer.var.data_ptr())
        self.totals = torch.zeros(6, device=self.device)
        # one squared-norm part per ppo_reduce_grads block
        self._sumsq = torch.zeros(math.ceil(self.num_params * REDUCE_SLICES / REDUCE_THREADS),
                                  device=self.device)
        self._partial_grads: torch.Tensor | None = None
        self._partial_stats: torch.Tensor | None = None
        if spec.kind == "box":
            self._low = torch.tensor(spec.low, device=self.device)
            self._high = torch.tensor(spec.high, device=self.device)
            self._bounded = all(math.isfinite(x) for x in spec.low + spec.high)
        else:
            self._low = self._high = torch.zeros(1, device=self.device)
            self._bounded = False

    @staticmethod
    def _read_layout(module) -> tuple[int, ...]:
        import numpy as np

        torch.cuda.synchronize()
        return tuple(int(v) for v in np.frombuffer(module.read_global("ppo_mlp_layout"),
                                                   dtype=np.int32))

    def _grid(self, rows: int, blocks: int) -> tuple[int, int, int]:
        return (max(1, min(math.ceil(rows / self.tile), blocks)), 1, 1)

    # -- roll-out --

    def act(self, obs: torch.Tensor, noise: torch.Tensor, obs_out: torch.Tensor,
            actions_out: torch.Tensor, log_probs_out: torch.Tensor,
            env_actions: torch.Tensor) -> None:
        """Sample for ``obs`` ``(N, D)`` with ``noise`` ``(N, head)`` (uniform for
        categorical heads, standard normal for Box); writes the storage rows ``obs_out``,
        ``actions_out``, ``log_probs_out`` and the env's ``env_actions``."""
        n = obs.shape[0]
        obs = obs.contiguous()
        self._act(self._grid(n, self.forward_blocks), (self.threads, 1, 1),
                  (self.flat_params.data_ptr(), obs.data_ptr(), n, noise.data_ptr(),
                   *self._norm, self._low.data_ptr(), self._high.data_ptr(),
                   int(self._bounded), obs_out.data_ptr(), actions_out.data_ptr(),
                   log_probs_out.data_ptr(), env_actions.data_ptr()))

    def values(self, obs: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``V(obs)`` for contiguous ``obs`` ``(M, D)`` into ``out`` ``(M,)``."""
        n = obs.shape[0]
        self._values(self._grid(n, self.forward_blocks), (self.threads, 1, 1),
                     (self.flat_params.data_ptr(), obs.data_ptr(), n, *self._norm,
                      out.data_ptr()))
        return out

    def gae(self, rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor,
            terminated: torch.Tensor, done: torch.Tensor, gamma: float, gae_lambda: float,
            advantages: torch.Tensor, returns: torch.Tensor) -> None:
        """:func:`gpu_vecenv.train.losses.gae_advantages` into ``advantages`` and
        ``returns``; every array ``(T, N)`` and contiguous."""
        steps, n = rewards.shape
        self._gae((math.ceil(n / REDUCE_THREADS), 1, 1), (REDUCE_THREADS, 1, 1),
                  (rewards.data_ptr(), values.data_ptr(), next_values.data_ptr(),
                   terminated.data_ptr(), done.data_ptr(), steps, n, gamma,
                   gamma * gae_lambda, advantages.data_ptr(), returns.data_ptr()))

    # -- update --

    def advantage_stats(self, advantages: torch.Tensor, order: torch.Tensor, size: int,
                        count: int, out: torch.Tensor) -> None:
        """``out[2 m], out[2 m + 1]`` = mean and std of the advantages of minibatch
        ``m < count`` (rows ``order[m * size:(m + 1) * size]``)."""
        chunks = math.ceil(size / (STATS_THREADS * STATS_PER_THREAD))
        needed = count * chunks * 3
        if self._adv_partials is None or self._adv_partials.numel() < needed:
            self._adv_partials = torch.empty(needed, device=self.device)
        self._adv_stats((count, chunks, 1), (STATS_THREADS, 1, 1),
                        (advantages.data_ptr(), order.data_ptr(), size,
                         self._adv_partials.data_ptr()))
        self._adv_combine((math.ceil(count / 32), 1, 1), (32, 1, 1),
                          (self._adv_partials.data_ptr(), chunks, count, out.data_ptr()))

    def minibatch_gradient(self, batch: dict[str, torch.Tensor], order: torch.Tensor,
                           start: int, size: int, adv_stats: torch.Tensor, clip_coef: float,
                           ent_coef: float, vf_coef: float, clip_vloss: bool,
                           norm_adv: bool) -> None:
        """The PPO loss gradient of rows ``order[start:start + size]`` of ``batch``
        (``obs``, ``actions``, ``log_probs``, ``advantages``, ``returns``, ``values``:
        flat, contiguous) into the flat gradient; adds the minibatch's mean loss,
        policy loss, value loss, entropy, approx KL and clip fraction to :attr:`totals`.
        ``adv_stats``: the minibatch's (mean, std) from :meth:`advantage_stats`."""
        grid = self._grid(size, self.update_blocks)
        rows = _NSTATS + (self.spec.head_size if self.spec.kind == "box" else 0)
        needed = grid[0] * self.num_params
        if self._partial_grads is None or self._partial_grads.numel() < needed:
            self._partial_grads = torch.empty(needed, device=self.device)
            self._partial_stats = torch.empty(grid[0] * rows, device=self.device)
        assert self._partial_stats is not None
        self._update(grid, (self.threads, 1, 1),
                     (self.flat_params.data_ptr(), batch["obs"].data_ptr(),
                      batch["actions"].data_ptr(), batch["log_probs"].data_ptr(),
                      batch["advantages"].data_ptr(), batch["returns"].data_ptr(),
                      batch["values"].data_ptr(), order.data_ptr(), start, size,
                      adv_stats.data_ptr(), *self._norm, clip_coef, ent_coef, vf_coef,
                      int(clip_vloss), int(norm_adv), self._partial_grads.data_ptr(),
                      self._partial_stats.data_ptr()))
        self._reduce((self._sumsq.numel(), 1, 1), (REDUCE_THREADS, 1, 1),
                     (self._partial_grads.data_ptr(), self._partial_stats.data_ptr(),
                      grid[0], 1.0 / size, ent_coef, vf_coef, self.flat_grads.data_ptr(),
                      self._sumsq.data_ptr(), self.totals.data_ptr()))

    def clip_gradient(self, max_norm: float) -> None:
        """``torch.nn.utils.clip_grad_norm_`` on the flat gradient (after
        :meth:`minibatch_gradient`)."""
        blocks = math.ceil(self.num_params / REDUCE_THREADS)
        self._clip((blocks, 1, 1), (REDUCE_THREADS, 1, 1),
                   (self.flat_grads.data_ptr(), self._sumsq.data_ptr(), self._sumsq.numel(),
                    max_norm))
