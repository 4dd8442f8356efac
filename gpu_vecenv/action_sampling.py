"""Random actions drawn on the env's device: what ``env.sample_actions()`` returns.

Gymnasium's ``envs.action_space.sample()`` draws on the host with numpy; a random policy on
a GPU env then pays a host draw and a copy every step, or the user writes ``torch.randint``
and its generator. :class:`ActionSampler` draws the whole batch in one small kernel from the
env's own counter-based RNG (:mod:`gpu_vecenv.seeding`), which gives it three properties:

- reproducible: a draw is a pure function of (the env's seed, the slot, the slot's count of
  draws so far), in stream :data:`~gpu_vecenv.seeding.STREAM_ACTIONS`, separate from the
  initial states' stream; ``reset(seed=...)`` restarts the counts of the envs it seeds, so
  the same seed gives the same actions, on the kernels and on the torch backend alike (bit
  for bit: :func:`sample_reference` is the definition the kernel is tested against);
- capturable: the counts live on the device and each slot's is read and advanced by its own
  thread, so a CUDA graph holding the launch draws new actions at every replay;
- asynchronous: nothing is read back on the host.

Component ``k`` of slot ``s``'s action is word ``k`` of the draw (see
``cuda_src/sample_actions.cu``): ``start + (word * n) >> 32`` for ``Discrete(n)`` /
``MultiDiscrete`` (``n <= 2**31``; bias below ``n / 2**32``), ``low + (high - low) * u`` with
``u = (word >> 8) * 2**-24`` in float32 for a bounded ``Box`` (``high`` itself is never
drawn). Unbounded ``Box`` dimensions have no uniform distribution and are refused.

Cost (H200, CartPole, captured roll-outs, docs/capture.md): 0.3-0.45 µs a step less than a
``torch.randint`` policy up to 16,384 envs (the first four components' ranges reach the
kernel as arguments, so a draw waits for one round trip to memory, its seed and count); at
a million envs and more, where a step is bandwidth-bound, more than a ``torch.randint``
(a draw reads the seed and count and writes the count: about 24 bytes an env against the 8
a ``torch.randint`` writes).
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch

from gpu_vecenv import seeding

MAX_CHOICES = 2**31
"""Largest ``Discrete`` / ``MultiDiscrete`` size the sampler draws from (the word times the
size must fit in int64 on the torch side)."""


class ActionSampler:
    """Random actions of one env's batched action space, drawn where the env runs.

    Args:
        space: the env's single action space (``Discrete``, ``MultiDiscrete`` or a bounded
            float ``Box``).
        num_slots: actions per batch ``n`` (``num_envs``; games × agents for a multi-agent
            env).
        slots_per_seed: slots sharing one seed (1; agents per game for a multi-agent env).
        device: the env's device.
        use_kernel: draw with ``cuda_src/sample_actions.cu`` (a CUDA device whose env runs
            on the kernels) rather than :func:`sample_reference` in torch ops.

    Raises:
        TypeError / ValueError: a space it cannot sample uniformly.
    """

    def __init__(self, space: gym.Space, num_slots: int, slots_per_seed: int,
                 device: torch.device, use_kernel: bool):
        self.kind, low, high, self.component_shape = describe_space(space)
        self.num_slots, self.slots_per_seed, self.device = num_slots, slots_per_seed, device
        self.dims = int(low.numel())
        self._first_low_high = (_first_four(low), _first_four(high))
        """The first four entries of ``low`` and ``high`` on the host (0 past ``dims``): the
        kernel takes them as arguments."""
        self.dtype = torch.float32 if self.kind == "box" else torch.int64
        self.low, self.high = low.to(device), high.to(device)
        """``(dims,)``: the low end and, for Box, the high end; for integer spaces ``high``
        holds the number of choices of each component."""
        self.counters = torch.zeros(num_slots, dtype=torch.int32, device=device)
        """``(n,)`` each slot's draws so far, modulo 2**32 (stored as int32)."""
        self._slot = torch.arange(num_slots, dtype=torch.int64, device=device)
        self._kernel = _SampleKernel(self) if use_kernel else None

    def sample(self, seeds: torch.Tensor) -> torch.Tensor:
        """One action per slot, a new tensor: ``(n,)`` int64 (``Discrete``) or ``(n, *shape)``
        (int64 ``MultiDiscrete``, float32 ``Box``); advances every slot's count.

        Args:
            seeds: ``(n // slots_per_seed,)`` int64, the env's seeds (its ``buffers.seed``).
        """
        out = torch.empty((self.num_slots, *self.component_shape), dtype=self.dtype,
                          device=self.device)
        if self._kernel is not None:
            self._kernel(out, seeds)
        else:
            seed_of_slot = seeds.repeat_interleave(self.slots_per_seed)
            out.copy_(sample_reference(self.kind, self.low, self.high, seed_of_slot,
                                       self._slot, self.counters).view(out.shape))
            self.counters.add_(1)
        return out

    def restart(self, seed_mask: torch.Tensor | None) -> None:
        """Restart the counts of the slots whose seed is in ``seed_mask``
        (``(n // slots_per_seed,)`` bool; all if ``None``): what reseeding them does."""
        if seed_mask is None:
            self.counters.zero_()
        else:
            self.counters.masked_fill_(seed_mask.repeat_interleave(self.slots_per_seed), 0)


def describe_space(space: gym.Space) -> tuple[str, torch.Tensor, torch.Tensor, tuple[int, ...]]:
    """``(kind, low, high, component shape)`` of a space the sampler can draw from; ``low``
    and ``high`` are flat ``(dims,)`` CPU tensors (``high``: choices, for integer spaces)."""
    if isinstance(space, gym.spaces.Discrete):
        starts, counts, shape = np.array([space.start]), np.array([space.n]), ()
    elif isinstance(space, gym.spaces.MultiDiscrete):
        starts, counts, shape = np.ravel(space.start), np.ravel(space.nvec), space.shape
    elif isinstance(space, gym.spaces.Box):
        low = np.ravel(space.low).astype(np.float32)
        high = np.ravel(space.high).astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            span = high - low
        if not (np.isfinite(low).all() and np.isfinite(high).all() and np.isfinite(span).all()):
            raise ValueError(f"sample_actions draws uniformly from a bounded Box; {space} has "
                             "unbounded dimensions (or a span beyond float32)")
        return "box", torch.from_numpy(low), torch.from_numpy(high), tuple(space.shape)
    else:
        raise TypeError(f"sample_actions does not support {space}")
    if counts.size and (counts.min() < 1 or counts.max() > MAX_CHOICES):
        raise ValueError(f"sample_actions draws from 1 to 2**31 choices per component; {space} "
                         "has more")
    return ("discrete", torch.as_tensor(starts.astype(np.int64)),
            torch.as_tensor(counts.astype(np.int64)), tuple(shape))


def sample_reference(kind: str, low: torch.Tensor, high: torch.Tensor, seed: torch.Tensor,
                     slot: torch.Tensor, counter: torch.Tensor) -> torch.Tensor:
    """The definition of the sampled actions, in torch ops (any device).

    Args:
        kind: ``"discrete"`` (Discrete and MultiDiscrete) or ``"box"``.
        low, high: ``(dims,)`` as :attr:`ActionSampler.low` / ``high``.
        seed: ``(n,)`` int64, each slot's seed.
        slot: ``(n,)`` int64 slot indices.
        counter: ``(n,)`` int32 or int64 counts (their low 32 bits are used).

    Returns:
        ``(n, dims)`` int64 or float32.
    """
    words = seeding.random_words(seed, slot, counter.to(torch.int64), low.numel(),
                                 seeding.STREAM_ACTIONS)
    if kind == "discrete":
        return low + ((words * high) >> 32)
    span = high - low  # float32, rounded before the product, as the kernel does
    return seeding.uniform_from_words(words) * span + low


def _first_four(values: torch.Tensor) -> tuple:
    """``values[:4]`` as Python numbers, padded with zeros to four."""
    first = values[:4].tolist()
    return tuple(first) + (type(first[0])(0) if first else 0,) * (4 - len(first))


class _SampleKernel:
    """``sample_<kind>_actions`` of ``cuda_src/sample_actions.cu``, bound to one sampler."""

    def __init__(self, sampler: ActionSampler):
        from gpu_vecenv.backends.compiler import load_module
        from gpu_vecenv.backends.cuda import BLOCK_SIZE
        from gpu_vecenv.backends.launch import Kernel

        index = sampler.device.index if sampler.device.index is not None else 0
        module = load_module("sample_actions", index)
        # counters, low (start), high (count), the first four of each by value (one round
        # trip to memory a draw: docs in sample_actions.cu), n, slots_per_seed, dims: fixed,
        # packed once; then the seeds and the output, packed at every call.
        value = "f" if sampler.kind == "box" else "q"
        first_low, first_high = sampler._first_low_high
        fixed = (sampler.counters.data_ptr(), sampler.low.data_ptr(), sampler.high.data_ptr(),
                 *first_low, *first_high, sampler.num_slots, sampler.slots_per_seed,
                 sampler.dims)
        self._kernel = Kernel(module, f"sample_{sampler.kind}_actions",
                              "PPP" + value * 8 + "iii" + "PP", fixed=fixed)
        self._grid = (math.ceil(sampler.num_slots / BLOCK_SIZE), 1, 1)
        self._block = (BLOCK_SIZE, 1, 1)
        self._sampler = sampler  # keeps the tensors behind the pointers alive

    def __call__(self, out: torch.Tensor, seeds: torch.Tensor) -> None:
        self._kernel(self._grid, self._block, (seeds.data_ptr(), out.data_ptr()))
