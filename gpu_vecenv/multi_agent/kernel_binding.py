"""How a multi-agent env's kernel file is launched: :class:`GameKernelBinding`.

An env module declares its binding beside its torch reference (``envs/tag.py``): the
fields of the ``.cu``'s constants struct and where each value comes from, its state
fields and scratch buffers in the order of its structs, and how to pick a kernel. The
``.cu`` exports the same struct as a text table, ``__device__ char <name>_consts_layout[]
= "int num_agents;float grid_length;..."`` (written by ``GV_GAME_CONSTS`` of
``common/games.cuh`` from the one field list that also declares the struct), and
:func:`check_consts_layout` compares the two when the kernels load, so a field added,
dropped, renamed or retyped on one side only fails at once with both lists in the
message, instead of shifting every constant after it.

Everything here is picklable (names, numbers, module-level functions), since a
definition travels with a pickled env.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gpu_vecenv.kernel_binding import compare_layouts, parse_layout

PACKED_BLOCK = 32
"""Threads of a block of a packed step (:attr:`GameKernelBinding.packed_step`): one warp,
``PACKED_BLOCK // A`` games of ``A <= PACKED_BLOCK // 2`` agents."""

KINDS = {"i": "int", "f": "float"}
"""Kinds of a constant: the letter packed into the launch, and the C type of the struct
field (both 4 bytes)."""


@dataclass(frozen=True)
class GameLaunch:
    """The launch shape the CUDA backend chose for an env (what a constant or the shared
    memory size may depend on besides the params)."""

    block: int
    """Threads per block."""
    blocks_per_game: int
    """Consecutive blocks of one game."""
    threads_per_agent: int = 1
    """H > 1: a one-block launch holds H threads per agent (threads ``p * A + a``,
    ``0 <= p < H``, for agent ``a``; :attr:`GameKernelBinding.threads_per_agent` says when)."""
    num_games: int = 0
    """G, the env's games."""
    games_per_block: int = 1
    """Games one block holds: above 1 only in the packed step's launch
    (:attr:`GameKernelBinding.packed_step`)."""


@dataclass(frozen=True)
class KernelConstant:
    """One field of the ``.cu``'s constants struct."""

    name: str
    """The C field's name."""
    kind: str
    """``"i"`` (int32) or ``"f"`` (float32)."""
    source: str | float | Callable[[Any, GameLaunch], float]
    """The params' attribute (a field or a property) holding the value, the value, or a
    module-level function ``(params, launch) -> value`` (for what depends on the launch)."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kernel constant {self.name}: kind must be one of {list(KINDS)}")

    def value(self, params: Any, launch: GameLaunch) -> int | np.float32:
        """The packed value: an int, or the float rounded to float32 as torch rounds a
        scalar operand."""
        if isinstance(self.source, str):
            raw = getattr(params, self.source)
        elif callable(self.source):
            raw = self.source(params, launch)
        else:
            raw = self.source
        return int(raw) if self.kind == "i" else np.float32(raw)


@dataclass(frozen=True)
class GameKernelBinding:
    """What the generic CUDA backend needs to launch ``cuda_src/<name>.cu``.

    Every kernel of the file takes ``(Consts, State, Buffers, Outputs, action, mask,
    blocks_per_game, mode, first_phase, last_phase)``: the constants, then a pointer per
    state field, then the buffers (``seed``, ``rng_counter``, ``pending``,
    ``invalid_action``, ``error_count``, then the env's own, :attr:`buffers`), then the six
    outputs (``common/games.cuh`` documents them).
    """

    constants: tuple[KernelConstant, ...]
    """The constants struct's fields, in C order."""
    state_fields: tuple[str, ...]
    """The state tensors passed, in the order of the ``.cu``'s state struct."""
    buffers: Callable[[Any, int, torch.device, torch.Tensor], list[torch.Tensor]]
    """``(params, num_games, device, visible) -> tensors`` after the five common buffers,
    in struct order; ``visible`` is the runtime's ``(G*A,)`` bool scratch (which slots show
    an observation), to be placed where the struct has it."""
    kernel_name: Callable[[Any, int, torch.device], str]
    """``(params, blocks in the launch, device) -> the kernel to launch``."""
    kernels: tuple[str, ...]
    """Every kernel of the file (what ``gpu-vecenv compile`` builds)."""
    kernel_flags: Callable[[str], tuple[str, ...]] | None = None
    """``kernel -> -D flags`` that build only that kernel of the file; ``None``: none."""
    shared_bytes: Callable[[Any, GameLaunch, torch.device], int] | None = None
    """``(params, launch, device) -> dynamic shared memory per block`` the kernels are
    launched with (they may read its size); ``None``: none."""
    threads_per_agent: Callable[[Any, int, torch.device], int] | None = None
    """``(params, num_games, device) -> H``: threads per agent of the launch (H > 1 only
    where ``H * A`` threads fit one block: :class:`GameLaunch`); ``None``: 1."""
    check_params: Callable[[Any], None] | None = None
    """Raises ``ValueError`` for params the kernels cannot run (the torch backend can)."""
    one_block_step: Callable[[Any, str], str | None] | None = None
    """``(params, kernel) -> name or None``: the file's kernel that runs a whole step of
    games that fit one block (same arguments, launched with the step's first and last
    phase) in place of ``kernel``, or ``None`` where ``kernel`` runs those steps itself (as it
    does when this is ``None``)."""
    packed_step: Callable[[Any, str, int, torch.device], tuple[str, int] | None] | None = None
    """``(params, kernel, num_games, device) -> (name, games per block) or None``: the file's
    kernel that runs a whole step of several small games a block, in place of ``kernel``
    (or of :attr:`one_block_step`'s), and how many games (``2 <= n <= PACKED_BLOCK // A``) a
    block holds; ``None``: one game a block. The backend launches it, with the step's
    arguments, on blocks of :data:`PACKED_BLOCK` threads (one warp): game ``q`` of block
    ``b`` is game ``b * n + q``, on threads ``[q * A, (q + 1) * A)``; the last block holds
    the games left. It is asked only where ``A <= PACKED_BLOCK // 2`` and the step has one
    thread per agent; the constants are packed with that launch (``games_per_block = n``)."""
    path: str | None = None
    """The ``.cu`` of a game outside the package (it may include ``common/games.cuh``);
    ``None``: ``cuda_src/<name>.cu``."""

    def flags_for(self, kernel: str) -> tuple[str, ...]:
        return () if self.kernel_flags is None else tuple(self.kernel_flags(kernel))

    def pack_constants(self, params: Any, launch: GameLaunch) -> tuple[list, str]:
        """The constants' values and their ``struct`` format (one letter each)."""
        return ([c.value(params, launch) for c in self.constants],
                "".join(c.kind for c in self.constants))

    def expected_layout(self) -> str:
        """The table the ``.cu`` must export: ``"int num_agents;float grid_length;..."``."""
        return "".join(f"{KINDS[c.kind]} {c.name};" for c in self.constants)


def check_consts_layout(env_name: str, binding: GameKernelBinding, table: bytes | str) -> None:
    """Raise :class:`~gpu_vecenv.kernel_binding.KernelLayoutError` (a ``RuntimeError``)
    unless ``table`` (the ``.cu``'s ``<name>_consts_layout``, NUL-terminated bytes or text)
    lists exactly the binding's constants (:func:`gpu_vecenv.kernel_binding.compare_layouts`,
    as for single-agent envs)."""
    exported = table.split(b"\0")[0].decode() if isinstance(table, bytes) else table
    compare_layouts(env_name, parse_layout(exported), parse_layout(binding.expected_layout()),
                    binding.path or f"cuda_src/{env_name}.cu", "kernel_binding",
                    "GV_GAME_CONSTS(...)")
