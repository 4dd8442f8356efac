"""The contract of a multi-agent env module (``envs/tag.py``): :class:`MultiAgentDefinition`.

Shapes, with ``G`` games of ``A`` agents: per-agent state ``(G, A)``, per-game state
``(G,)`` (structure of arrays, so neighbouring kernel threads read neighbouring addresses).
The runtime is :class:`gpu_vecenv.multi_agent.MultiAgentVectorEnv`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from gpu_vecenv.definition import State, StateField, check_parameter_names

ROLES = ("tagger", "runner")
"""Role ids used in ``info["role"]``: 0 tagger, 1 runner."""


class GameStep(NamedTuple):
    """What a multi-agent env's ``step`` returns (``G`` games, ``A`` agents)."""

    state: State
    reward: torch.Tensor
    """``(G, A)`` float32; zero for agents that were out of the game."""
    left: torch.Tensor
    """``(G, A)`` bool: agents that left the game on this step."""
    terminated: torch.Tensor
    """``(G,)`` bool: the game ended by its rules."""
    truncated: torch.Tensor
    """``(G,)`` bool: the game reached its time limit."""


@dataclass(frozen=True)
class MultiAgentDefinition:
    """Everything the runtime needs to know about one multi-agent env."""

    name: str
    """Short name; also the stem of the kernel file ``cuda_src/<name>.cu``."""
    params_type: type
    agent_fields: tuple[StateField, ...]
    """Per-agent state, ``(G, A)`` tensors."""
    game_fields: tuple[StateField, ...]
    """Per-game state, ``(G,)`` tensors."""
    roles: Callable[[Any], tuple[str, ...]]
    """``params -> role name ("tagger" or "runner") of each agent``."""
    observation_space: Callable[[Any], gym.spaces.Box]
    action_space: Callable[[Any], gym.Space]
    reset: Callable[[Any, torch.Tensor], State]
    """``(params, u) -> state`` with ``u`` ``(G, A, 4)`` uniforms: one Philox block per
    agent (index = game, counter = the game's reset count, block = agent)."""
    step: Callable[[Any, State, torch.Tensor], GameStep]
    """``(params, state, action (G, A, ...)) -> GameStep``; actions already valid."""
    observe: Callable[[Any, State], torch.Tensor]
    """``(params, state) -> (G, A, obs_dim)`` float32, the rules' observation."""
    in_game: Callable[[Any, State], torch.Tensor]
    """``(params, state) -> (G, A)`` bool."""
    presets: tuple[str, ...] = ()
    """Names of classmethods of ``params_type`` returning a preset, e.g. the training set."""
    render_frame: Callable[[Any, dict[str, np.ndarray]], np.ndarray] | None = None
    """``(params, one game's state as numpy arrays) -> (H, W, 3) uint8``."""
    render_fps: int = 10
    """Frames per second of a rendered game (``metadata["render_fps"]``, GIFs, windows)."""

    def make_params(self, preset: str | None = None, **overrides: Any) -> Any:
        """The params: a preset (or the defaults) with ``overrides``; unknown names are a
        ``TypeError`` listing the accepted ones."""
        check_parameter_names(self.name, self.params_type, overrides)
        if preset is None:
            return self.params_type(**overrides)
        if preset not in self.presets:
            raise ValueError(f"unknown preset {preset!r} for {self.name}; "
                             f"available: {list(self.presets)}")
        return getattr(self.params_type, preset)(**overrides)

    def agent_names(self, params: Any) -> list[str]:
        """``tagger_0, …, runner_0, …`` in agent order."""
        counts = dict.fromkeys(ROLES, 0)
        names = []
        for role in self.roles(params):
            names.append(f"{role}_{counts[role]}")
            counts[role] += 1
        return names
