"""The persistent device tensors of a multi-agent vector env, and what a backend sees."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.actions import ActionChecker
from gpu_vecenv.definition import State
from gpu_vecenv.multi_agent.definition import MultiAgentDefinition


@dataclass
class GameBuffers:
    """Persistent tensors: ``state`` (agent fields ``(G, A)``, game fields ``(G,)``),
    ``seed`` / ``rng_counter`` ``(G,)`` int64, ``pending`` ``(G,)`` bool (the game ended
    and awaits its reset), ``invalid_action`` ``(num_envs,)`` bool (last step) and
    ``error_count`` ``()`` int32 (invalid actions since the last check)."""

    state: State
    seed: torch.Tensor
    rng_counter: torch.Tensor
    pending: torch.Tensor
    invalid_action: torch.Tensor
    error_count: torch.Tensor

    @classmethod
    def allocate(cls, definition: MultiAgentDefinition, games: int, agents: int,
                 device: torch.device) -> GameBuffers:
        state = {f.name: torch.zeros((games, agents), dtype=f.dtype, device=device)
                 for f in definition.agent_fields}
        state.update({f.name: torch.zeros(games, dtype=f.dtype, device=device)
                      for f in definition.game_fields})
        return cls(
            state=state,
            seed=torch.zeros(games, dtype=torch.int64, device=device),
            rng_counter=torch.zeros(games, dtype=torch.int64, device=device),
            pending=torch.zeros(games, dtype=torch.bool, device=device),
            invalid_action=torch.zeros(games * agents, dtype=torch.bool, device=device),
            error_count=torch.zeros((), dtype=torch.int32, device=device),
        )


@dataclass
class GameContext:
    """The env's fixed configuration and persistent buffers, handed to its backend (so a
    backend never needs the env object itself)."""

    definition: MultiAgentDefinition
    params: Any
    num_games: int
    num_agents: int
    device: torch.device
    autoreset_mode: AutoresetMode
    actions: ActionChecker
    buffers: GameBuffers
    obs_dim: int
