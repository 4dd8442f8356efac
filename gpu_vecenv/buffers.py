"""Preallocated device tensors of a vector env: persistent state and per-step outputs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import repeat

import torch

from gpu_vecenv.backends.launch import current_raw_stream
from gpu_vecenv.definition import EnvDefinition


@dataclass
class EnvBuffers:
    """Persistent per-env tensors, updated in place by the backends.

    Shapes, ``n`` = number of envs:

    - ``state``: one ``(n,)`` tensor per state field of the env definition;
    - ``state_blocks``: the same memory by dtype: the fields of one dtype (in
      ``state_fields`` order) are the rows of one ``(fields, n)`` tensor, so a backend can
      update a whole state with one op;
    - ``elapsed``: ``(n,)`` int32, steps taken in the current episode;
    - ``rng_counter``: ``(n,)`` int64, draws (resets) taken from the env's RNG stream;
    - ``seed``: ``(n,)`` int64, the 64-bit seed of each env (two's complement);
    - ``autoreset_pending``: ``(n,)`` bool, the episode ended on the last step
      (NEXT_STEP resets these envs on the next ``step()``);
    - ``invalid_action``: ``(n,)`` bool, the env got an invalid action on the last step
      and was left unchanged;
    - ``error_count``: ``()`` int32, invalid actions seen since the last check.
    """

    state: dict[str, torch.Tensor]
    state_blocks: dict[torch.dtype, torch.Tensor]
    elapsed: torch.Tensor
    rng_counter: torch.Tensor
    seed: torch.Tensor
    autoreset_pending: torch.Tensor
    invalid_action: torch.Tensor
    error_count: torch.Tensor

    @classmethod
    def allocate(cls, definition: EnvDefinition, n: int, device: torch.device) -> EnvBuffers:
        fields = definition.state_fields
        blocks, rows = {}, {}
        for dtype in dict.fromkeys(f.dtype for f in fields):
            names = [f.name for f in fields if f.dtype == dtype]
            blocks[dtype] = torch.zeros((len(names), n), dtype=dtype, device=device)
            rows.update(zip(names, blocks[dtype].unbind(0), strict=True))  # views
        return cls(
            state={f.name: rows[f.name] for f in fields},
            state_blocks=blocks,
            elapsed=torch.zeros(n, dtype=torch.int32, device=device),
            rng_counter=torch.zeros(n, dtype=torch.int64, device=device),
            seed=torch.zeros(n, dtype=torch.int64, device=device),
            autoreset_pending=torch.zeros(n, dtype=torch.bool, device=device),
            invalid_action=torch.zeros(n, dtype=torch.bool, device=device),
            error_count=torch.zeros((), dtype=torch.int32, device=device),
        )


@dataclass
class StepOutputs:
    """What one ``step()`` returns, written by the backend.

    - ``obs``: ``(n, obs_dim)`` float32;
    - ``reward``: ``(n,)`` float32;
    - ``terminated``, ``truncated``: ``(n,)`` bool;
    - ``final_obs``: ``(n, obs_dim)`` float32 (SAME_STEP only, else ``None``): the last
      observation of an episode that ended on this step, and the current observation
      for the other envs;
    - ``active``: ``(n,)`` bool (multi-agent envs only, else ``None``): the slots whose
      observation is live after this step (``info["active"]``).
    """

    obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor | None
    active: torch.Tensor | None = None
    pointers: tuple[int, ...] = field(default=(), repr=False, compare=False)
    """The ``data_ptr()`` of each of the six (0 for ``None``), as a kernel launch passes
    them; ``()`` until :meth:`data_ptrs` computes them (an output ring fills them in)."""

    def data_ptrs(self) -> tuple[int, ...]:
        """:attr:`pointers`, computed on first use (the tensors of one ``StepOutputs`` are
        fixed: a backend reads their addresses once, not on every step)."""
        if not self.pointers:
            self.pointers = tuple(0 if t is None else t.data_ptr() for t in (
                self.obs, self.reward, self.terminated, self.truncated, self.final_obs,
                self.active))
        return self.pointers

    @classmethod
    def allocate(
        cls, n: int, obs_dim: int, device: torch.device, with_final_obs: bool,
        with_active: bool = False,
    ) -> StepOutputs:
        return cls(
            obs=torch.empty((n, obs_dim), dtype=torch.float32, device=device),
            reward=torch.empty(n, dtype=torch.float32, device=device),
            terminated=torch.empty(n, dtype=torch.bool, device=device),
            truncated=torch.empty(n, dtype=torch.bool, device=device),
            final_obs=(torch.empty((n, obs_dim), dtype=torch.float32, device=device)
                       if with_final_obs else None),
            active=torch.empty(n, dtype=torch.bool, device=device) if with_active else None,
        )


CAPTURING = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
"""Whether torch's current CUDA stream is capturing a graph (``None`` where torch lacks it)."""


class OutputRing:
    """Fresh :class:`StepOutputs` for ``copy=True`` at a fraction of the allocator calls.

    Allocating a step's four to six outputs costs as many calls into torch's allocator
    (on a CUDA device ~2-3 us of host time each with their frees, the largest part of a
    small env's ``step()``). Where at least two steps' outputs fit in
    :attr:`MAX_CHUNK_BYTES` (up to 512 KiB a step: CartPole up to ~23k envs), the ring
    allocates them for :attr:`steps` steps at once (at most :attr:`MAX_STEPS`), one
    tensor per output, and hands out one row of each per step: every step gets memory
    no other step gets, so outputs never alias earlier or later ones, exactly as with
    separate allocations. A step then costs one view per output instead of one
    allocation.

    The price: an output a caller keeps keeps its whole chunk alive (at most
    :attr:`MAX_CHUNK_BYTES` of one output, ``steps`` steps' worth: who keeps one
    observation in every 32 holds 32 times the memory), and its storage (what
    ``torch.save`` writes with it) is the chunk. Rows start :attr:`ALIGN_BYTES`-aligned.
    Larger outputs are allocated per step, as is everything while the current stream
    captures a CUDA graph (the graph's memory pool must own what its replays write). A
    step on another stream than the chunk's starts a new chunk (a freed chunk is reused
    on its own stream at once, so only that stream may write it, as with per-step
    allocations).
    """

    MAX_STEPS = 32
    MAX_CHUNK_BYTES = 1 << 20
    """Bytes of all outputs of one chunk (its ``steps`` steps)."""
    ALIGN_BYTES = 64

    def __init__(self, n: int, obs_dim: int, device: torch.device, with_final_obs: bool,
                 with_active: bool = False):
        self._args = (n, obs_dim, device, with_final_obs, with_active)
        self._shapes = [((n, obs_dim), torch.float32), ((n,), torch.float32),
                        ((n,), torch.bool), ((n,), torch.bool)]
        if with_final_obs:
            self._shapes.append(((n, obs_dim), torch.float32))
        self._with_final_obs, self._with_active = with_final_obs, with_active
        if with_active:
            self._shapes.append(((n,), torch.bool))
        step_bytes = sum(self._row_elements(shape, dtype) * dtype.itemsize
                         for shape, dtype in self._shapes)
        self.steps = min(self.MAX_STEPS, self.MAX_CHUNK_BYTES // step_bytes)
        self._cuda = device.type == "cuda"
        self._device_index = device.index or 0
        self._stream: int | None = None
        """The raw handle of the stream the current chunk was allocated on (CUDA)."""
        self._rows: list[StepOutputs] = []

    def _row_elements(self, shape: tuple[int, ...], dtype: torch.dtype) -> int:
        align = self.ALIGN_BYTES // dtype.itemsize
        numel = math.prod(shape)
        return -(-numel // align) * align

    def next(self) -> StepOutputs:
        """A step's outputs, sharing memory with no other call's."""
        if self._cuda:
            if CAPTURING is not None and CAPTURING():
                return StepOutputs.allocate(*self._args)
            stream = current_raw_stream(self._device_index)
            if stream != self._stream:
                # The caching allocator recycles a chunk on the stream it was allocated
                # on, once freed: its rows are written on that stream only.
                self._rows, self._stream = [], stream
        rows = self._rows
        if not rows:
            if self.steps < 2:
                return StepOutputs.allocate(*self._args)
            self._rows = rows = self._chunk()
        return rows.pop()

    def _chunk(self) -> list[StepOutputs]:
        """``steps`` rows, last first: one tensor per output, one view of each per row."""
        device, steps = self._args[2], self.steps
        views, addresses = [], []
        for shape, dtype in self._shapes:
            row = self._row_elements(shape, dtype)
            chunk = torch.empty(steps * row, dtype=dtype, device=device)
            strides = (row, 1) if len(shape) == 1 else (row, shape[1], 1)
            views.append(reversed(chunk.as_strided((steps, *shape), strides).unbind(0)))
            row_bytes = row * dtype.itemsize
            last = chunk.data_ptr() + (steps - 1) * row_bytes
            addresses.append(range(last, last - steps * row_bytes, -row_bytes))
        if not self._with_final_obs:
            views.insert(4, repeat(None))
            addresses.insert(4, repeat(0))
        if not self._with_active:
            views.append(repeat(None))
            addresses.append(repeat(0))
        rows = zip(*views, *addresses, strict=False)  # repeat(): as long as the others
        return [StepOutputs(o, r, te, tr, f, a, (po, pr, pte, ptr, pf, pa))
                for o, r, te, tr, f, a, po, pr, pte, ptr, pf, pa in rows]
