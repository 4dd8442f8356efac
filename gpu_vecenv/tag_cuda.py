"""The CUDA backend of the Tag envs: ``cuda_src/tag.cu`` and ``cuda_src/tag_grid.cu``.

Same interface and semantics as :class:`gpu_vecenv.tag_torch_backend.MultiAgentTorchBackend`
(the GPU tests hold them together). Compiling, loading and the stream rules are those of
:mod:`gpu_vecenv.backends.cuda` (PyTorch's primary context, torch-allocated buffers,
launches on torch's current stream, capturable into CUDA graphs).

Each game gets ``ceil(A / block)`` blocks of ``block = min(256, A rounded up to 32)``
threads, one per agent. A step is a fixed sequence of phases (see ``tag.cu``): one
launch when a game fits one block, else one launch per phase, so games of any size run
without blocks waiting on each other.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.backends.compiler import KernelsUnavailable, load_module
from gpu_vecenv.backends.cuda import AUTORESET_CODES, f32
from gpu_vecenv.backends.launch import Kernel
from gpu_vecenv.tag_torch_backend import GameOutputs

if TYPE_CHECKING:
    from gpu_vecenv.multi_agent import MultiAgentVectorEnv

MAX_BLOCK = 256
MAX_OBSERVED = 32
"""Largest K (``num_other_agents_observed``) the kernel keeps (``TAG_MAX_OBSERVED``)."""

VALIDATE, MOVE, TAG, FINISH, FINAL_OBS, SAME_STEP_RESET, OBSERVE_STEP = range(7)
RESET_AGENTS, RESET_GAMES, OBSERVE_ONLY = 7, 8, 9


def _tag_consts(p) -> list:
    from gpu_vecenv.envs.tag import HALF_PI, TWO_PI

    if not p.use_full_observation and p.num_other_agents_observed > MAX_OBSERVED:
        raise ValueError(f"the CUDA kernel observes at most {MAX_OBSERVED} others; "
                         f"num_other_agents_observed={p.num_other_agents_observed}")
    ints = [p.num_agents, p.num_taggers, p.episode_length, p.num_acceleration_levels + 1,
            p.num_turn_levels + 1, int(p.use_full_observation), int(p.observe_own_role),
            p.num_observed, int(p.runner_exits_game_after_tagged), int(p.fixed_start_positions),
            p.obs_dim]
    floats = [p.grid_length, p.max_speed_tagger, p.max_speed_runner, p.tag_threshold,
              p.position_scale, p.speed_scale, TWO_PI, HALF_PI, p.edge_hit_penalty,
              p.step_penalty_for_tagger, p.step_reward_for_runner, p.tag_reward_for_tagger,
              p.tag_penalty_for_runner, p.end_of_game_reward_for_runner, p.episode_length]
    assert len(ints) + len(floats) == 26  # TagConsts: 104 bytes, a multiple of 8
    return [int(v) for v in ints] + [f32(v) for v in floats]


def _grid_consts(p) -> list:
    ints = [p.num_agents, p.grid_length, p.episode_length, int(p.use_full_observation),
            int(p.random_start), p.obs_dim]
    floats = [-p.wall_hit_penalty, p.tag_reward_for_tagger, -p.tag_penalty_for_runner,
              p.step_cost_for_tagger, -p.step_cost_for_tagger, p.grid_length, p.episode_length]
    return [int(v) for v in ints] + [f32(v) for v in floats] + [0]


TAG_KERNELS = tuple(f"tag_run_{suffix}" for suffix in (
    "full", "k4", "k8", "k10", "k16", "k32", "k4_wide", "k8_wide", "k10_wide", "k16_wide",
    "k32_wide"))
"""Every kernel of ``tag.cu`` (``tag_grid.cu`` has one, ``tag_grid_run``)."""


def kernel_flags(kernel: str) -> tuple[str, ...]:
    """The ``-D`` flags that build only ``kernel`` of its file: ``tag.cu`` holds eleven
    variants of one template, and compiling all of them made a first Tag env wait 26 s
    (NVRTC on the H200 machine) for the one it launches."""
    if kernel in TAG_KERNELS:
        return ("-DTAG_ONLY", f"-DTAG_ONLY_{kernel.removeprefix('tag_run_')}")
    return ()


def _kernel_name(name: str, p, blocks: int, device: torch.device) -> str:
    """``tag_run_full``, ``tag_run_k<kMax>[_wide]`` (partial, K <= kMax) or ``tag_grid_run``.
    The wide scan pays off when the launch has too few blocks to fill the GPU."""
    if name != "tag":
        return f"{name}_run"
    if p.use_full_observation:
        return "tag_run_full"
    k_max = next(k for k in (4, 8, 10, 16, MAX_OBSERVED) if p.num_other_agents_observed <= k)
    few_blocks = blocks < 2 * torch.cuda.get_device_properties(device).multi_processor_count
    return f"tag_run_k{k_max}" + ("_wide" if few_blocks and p.num_agents > 256 else "")


class TagCudaBackend:
    """Runs ``cuda_src/<definition.name>.cu`` on the buffers of a multi-agent env."""

    name = "cuda"

    def __init__(self, env: MultiAgentVectorEnv):
        name = env.definition.name
        if name not in ("tag", "tag_grid"):
            # under backend="auto" a custom multi-agent env falls back to the torch backend
            raise KernelsUnavailable(f"env {name!r} has no multi-agent CUDA kernels (only "
                                     "the shipped Tag envs have); use backend='torch'")
        if env.device.type != "cuda":
            raise RuntimeError(f"the CUDA backend needs a CUDA device, got {env.device}")
        self.env = env
        self.device = env.device
        self._device_index = env.device.index or 0
        self._cached_outputs: tuple[GameOutputs | None, tuple] = (None, ())
        p, b, s = env.params, env.buffers, env.buffers.state
        G, A = env.num_games, env.num_agents
        self.block = min(MAX_BLOCK, 32 * math.ceil(A / 32))
        self.blocks_per_game = math.ceil(A / self.block)
        if G * self.blocks_per_game >= 2**31 or G * A * env.obs_dim >= 2**62:
            raise ValueError(f"{G} games of {A} agents exceed the kernel's grid")
        self.mode = AUTORESET_CODES[env.autoreset_mode]

        def scratch(*shape, dtype=torch.int32):
            return torch.zeros(shape, dtype=dtype, device=self.device)

        self.visible = scratch(G * A, dtype=torch.bool)
        if name == "tag":
            consts = _tag_consts(p)
            self.game_counts = (scratch(G), scratch(G), scratch(G))
            self.tag_count = scratch(G, p.num_taggers)
            self.tables = (torch.as_tensor(p.acceleration_table, device=self.device),
                           torch.as_tensor(p.turn_table, device=self.device))
            state = [s[k] for k in ("x", "y", "speed", "direction", "acceleration",
                                    "in_game", "t")]
            extra = [self.game_counts[0], self.game_counts[1], self.game_counts[2],
                     self.tag_count, self.visible, *self.tables]
        else:
            consts = _grid_consts(p)
            self.game_counts = (scratch(G), scratch(G), scratch(G))
            state = [s["x"], s["y"], s["t"]]
            extra = [*self.game_counts, self.visible]
        buffers = [b.seed, b.rng_counter, b.pending, b.invalid_action, b.error_count, *extra]
        head = (*consts, *(t.data_ptr() for t in state), *(t.data_ptr() for t in buffers))
        consts_fmt = "".join("f" if isinstance(v, np.floating) else "i" for v in consts)
        kernel = _kernel_name(name, p, G * self.blocks_per_game, self.device)
        self._fn = Kernel(load_module(name, self._device_index,
                                      extra_flags=kernel_flags(kernel)),
                          kernel, consts_fmt + "P" * (len(state) + len(buffers)) + "P" * 6 + "PP"
                          + "iiii", fixed=head)
        self._grid = (G * self.blocks_per_game, 1, 1)
        self._block_shape = (self.block, 1, 1)
        self._step_phases = [VALIDATE, MOVE, TAG, FINISH, OBSERVE_STEP]
        if env.autoreset_mode == AutoresetMode.SAME_STEP:
            self._step_phases[4:4] = [FINAL_OBS, SAME_STEP_RESET]

    def _launch(self, outputs: tuple, action: int, mask: int, first: int, last: int) -> None:
        self._fn(self._grid, self._block_shape, (*outputs, action, mask, self.blocks_per_game,
                                                 self.mode, first, last))

    def _run(self, phases: list[int], outputs: tuple, action: int = 0, mask: int = 0) -> None:
        if self.blocks_per_game == 1:
            self._launch(outputs, action, mask, phases[0], phases[-1])
        else:
            for phase in phases:
                self._launch(outputs, action, mask, phase, phase)

    def reset_games(self, mask: torch.Tensor) -> None:
        """Fresh games where ``mask`` ((G,) bool), from each game's RNG stream."""
        mask = mask.contiguous()
        self._run([RESET_AGENTS, RESET_GAMES], (0,) * 6, mask=mask.data_ptr())

    def observe(self, visible: torch.Tensor, out: torch.Tensor) -> None:
        """``out`` ((num_envs, obs_dim)) = the observations, zero where not ``visible``."""
        self.visible.copy_(visible.reshape(-1))
        self._run([OBSERVE_ONLY], (out.data_ptr(), 0, 0, 0, 0, 0))

    def step(self, action: torch.Tensor, out: GameOutputs) -> None:
        """One step of every game, autoreset included (see ``tag.cu``)."""
        action = action.contiguous()
        cached, outputs = self._cached_outputs
        if out is not cached:  # with copy=False the same outputs come every step
            outputs = (out.obs.data_ptr(), out.reward.data_ptr(), out.terminated.data_ptr(),
                       out.truncated.data_ptr(), 0 if out.final_obs is None else
                       out.final_obs.data_ptr(), out.active.data_ptr())
            self._cached_outputs = (out, outputs)
        self._run(self._step_phases, outputs, action=action.data_ptr())
