"""The contract of a multi-agent env module (``envs/tag.py``): :class:`MultiAgentDefinition`.

Shapes, with ``G`` games of ``A`` agents: per-agent state ``(G, A)``, per-game state
``(G,)`` (structure of arrays, so neighbouring kernel threads read neighbouring addresses).
The runtime is :class:`gpu_vecenv.multi_agent.MultiAgentVectorEnv`; nothing in it knows
any particular game: roles, start draws and kernels are the definition's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from gpu_vecenv.definition import State, StateField, make_params

DRAWS_PER_BLOCK = 4
"""Uniforms in one Philox block, the most ``reset_draws_per_agent`` can be: agent ``a``'s
draws are the first words of block ``a`` of its game's stream, as the kernels read them."""


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
    """``params -> role name of each agent``; agents are named ``<role>_<i>``."""
    observation_space: Callable[[Any], gym.spaces.Box]
    action_space: Callable[[Any], gym.Space]
    reset: Callable[[Any, torch.Tensor], State]
    """``(params, u) -> state`` with ``u`` ``(G, A, reset_draws_per_agent)`` uniforms: the
    first words of one Philox block per agent (index = game, counter = the game's reset
    count, block = agent)."""
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
    role_names: tuple[str, ...] | None = None
    """The ids of ``info["role"]``: a role's index here. ``None``: the roles in the order
    they first appear in ``roles(params)``."""
    reset_draws_per_agent: int = DRAWS_PER_BLOCK
    """Uniforms ``reset`` reads per agent (at most :data:`DRAWS_PER_BLOCK`)."""
    same_start_every_episode: Callable[[Any], bool] | None = None
    """``params -> True`` when every reset of every game reuses the stream's first draw
    (index 0, counter 0) instead of the game's next one; ``None``: never."""
    kernel_binding: Any | None = None
    """The :class:`~gpu_vecenv.multi_agent.kernel_binding.GameKernelBinding` of
    ``cuda_src/<name>.cu``; ``None``: no kernels (the torch backend runs the env)."""

    def __post_init__(self) -> None:
        if not 1 <= self.reset_draws_per_agent <= DRAWS_PER_BLOCK:
            raise ValueError(f"reset_draws_per_agent must be in [1, {DRAWS_PER_BLOCK}], "
                             f"got {self.reset_draws_per_agent}")

    def make_params(self, preset: str | None = None, **overrides: Any) -> Any:
        """The params: a preset (or the defaults) with ``overrides``; unknown names are a
        ``TypeError`` listing the accepted ones."""
        return make_params(self.name, self.params_type, overrides, preset, self.presets)

    def role_ids(self, params: Any) -> list[int]:
        """The ``info["role"]`` id of each agent, in agent order."""
        roles = self.roles(params)
        names = self.role_names or tuple(dict.fromkeys(roles))
        return [names.index(role) for role in roles]

    def agent_names(self, params: Any) -> list[str]:
        """``<role>_<i>`` in agent order, counted per role (``tagger_0, …, runner_0, …``)."""
        counts: dict[str, int] = {}
        names = []
        for role in self.roles(params):
            names.append(f"{role}_{counts.get(role, 0)}")
            counts[role] = counts.get(role, 0) + 1
        return names
