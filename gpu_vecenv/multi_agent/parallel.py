"""Batched PettingZoo view of a multi-agent env: ``gpu_vecenv.parallel_env(id, num_games=G)``.

One ``ParallelEnv`` runs ``G`` games at once. Its dicts map agent names (Tag's
``tagger_0 …``, ``runner_0 …``) to tensors on the env's device whose first dimension is the game:
observations ``[G, obs_dim]``, actions ``[G, ...]`` (``[G, 2]`` for continuous Tag,
``[G]`` for gridworld Tag), rewards / terminations / truncations ``[G]``. Agents never
leave ``agents`` (they leave per game): ``infos[name]["active"]`` (``[G]`` bool) says in
which games the agent is live. Episodes, autoreset and idle agents work exactly as in
the Gymnasium view (:mod:`gpu_vecenv.multi_agent.vector_env`); ``reset(options={"reset_mask": m})``
takes a ``[G]`` mask. For one game with numpy values and agents removed as they leave,
use :mod:`gpu_vecenv.adapters.pettingzoo`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

try:
    from pettingzoo import ParallelEnv
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError("the PettingZoo views need pettingzoo: "
                      "pip install 'gpu-vecenv[pettingzoo]'") from exc

from gpu_vecenv.actions import ActionChecker
from gpu_vecenv.multi_agent.vector_env import MultiAgentVectorEnv


class BatchedParallelEnv(ParallelEnv):
    """``num_games`` games as one PettingZoo ``ParallelEnv`` of batched tensors.

    Args:
        env_id: a multi-agent id, e.g. ``"GPUTag-v0"`` or ``"GPUTagGrid-v0"``.
        num_games: number of games ``G``.
        **kwargs: as for :class:`~gpu_vecenv.multi_agent.MultiAgentVectorEnv` (device,
            backend, autoreset_mode, strict, copy, render_mode, preset, env params).
    """

    def __init__(self, env_id: str, num_games: int = 1, **kwargs: Any):
        from gpu_vecenv.entry_points import make_vec

        vec = make_vec(env_id, num_games, **kwargs)
        if not isinstance(vec, MultiAgentVectorEnv):
            raise TypeError(f"{env_id} is a single-agent env; use gpu_vecenv.make_vec")
        self.vec = vec
        self.num_games = vec.num_games
        self.device = vec.device
        self.possible_agents = list(vec.possible_agents)
        self.agents = list(self.possible_agents)
        self.render_mode = vec.render_mode
        self.metadata = {"name": f"{vec.definition.name}_batched",
                         "render_modes": vec.metadata["render_modes"],
                         "render_fps": vec.metadata["render_fps"], "is_parallelizable": True}
        self.observation_spaces = dict.fromkeys(self.possible_agents,
                                                vec.single_observation_space)
        self.action_spaces = dict.fromkeys(self.possible_agents, vec.single_action_space)
        self._agent_actions = ActionChecker(vec.single_action_space, vec.num_games, vec.device)
        """Checks one agent's ``[G, ...]`` actions (the vector env checks their values)."""

    def observation_space(self, agent: str):
        """The space of one game's value; the env's values are batched ``[G, ...]``."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str):
        return self.action_spaces[agent]

    def _split(self, values: torch.Tensor) -> dict[str, torch.Tensor]:
        grouped = values.view(self.num_games, len(self.possible_agents), *values.shape[1:])
        return {name: grouped[:, i] for i, name in enumerate(self.possible_agents)}

    def _infos(self, info: dict[str, Any]) -> dict[str, dict[str, Any]]:
        per_agent = {key: self._split(info[key]) for key in ("active", "final_obs", "_final_obs")
                     if key in info}
        return {name: {key: split[name] for key, split in per_agent.items()}
                for name in self.possible_agents}

    def reset(self, seed: int | list[int] | None = None, options: dict | None = None):
        """Reset all games (or ``options["reset_mask"]``, ``[G]`` bool). Returns
        ``(observations, infos)``: ``{name: [G, obs_dim]}``, ``{name: {"active": [G]}}``."""
        obs, info = self.vec.reset(seed=seed, options=options)
        return self._split(obs), self._infos(info)

    def step(self, actions: dict[str, Any]):
        """``actions``: ``{name: [G, ...]}`` for every agent (tensors on the device are
        used without copying to the host). Returns ``(observations, rewards,
        terminations, truncations, infos)``, each ``{name: [G, ...]}``.

        Raises (before anything changes), naming the agent: ``TypeError`` for ``actions``
        that are not a dict, or a value that is not numbers or of the wrong dtype;
        ``ValueError`` for missing or unknown agents, a wrong shape or device; the vector
        env's :class:`~gpu_vecenv.actions.InvalidActionError` for values out of range.
        """
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions must be a dict {{agent: [num_games, ...] actions}} "
                            f"over {self.possible_agents}, got {type(actions).__name__}")
        missing = [a for a in self.possible_agents if a not in actions]
        unknown = [a for a in actions if a not in self.observation_spaces]
        if missing or unknown:
            raise ValueError(f"actions must hold one [num_games, ...] entry for each of "
                             f"{self.possible_agents}; missing {missing}, unknown {unknown}")
        check = self._agent_actions.convert
        stacked = torch.stack([check(actions[a], name=f"actions[{a!r}]")
                               for a in self.possible_agents], dim=1)
        obs, reward, terminated, truncated, info = self.vec.step(
            stacked.reshape(self.vec.num_envs, *stacked.shape[2:]))
        return (self._split(obs), self._split(reward), self._split(terminated),
                self._split(truncated), self._infos(info))

    def sample_actions(self) -> dict[str, torch.Tensor]:
        """Random actions ``{name: [G, ...]}`` for every agent, drawn on the device: the
        batched counterpart of ``action_space(agent).sample()`` (see
        :meth:`~gpu_vecenv.base_vector_env.BaseVectorEnv.sample_actions`)."""
        return self._split(self.vec.sample_actions())

    def render(self):
        """``(H, W, 3)`` uint8 picture of game ``render_game`` (``render_mode="rgb_array"``;
        ``"human"`` shows it in a window after every ``reset()`` / ``step()`` and returns
        ``None``)."""
        frames = self.vec.render()
        return None if frames is None else frames[0]

    def get_state(self) -> dict[str, torch.Tensor]:
        return self.vec.get_state()

    def set_state(self, state: dict[str, Any]) -> dict[str, torch.Tensor]:
        return self._split(self.vec.set_state(state))

    def close(self) -> None:
        self.vec.close()


def parallel_env(env_id: str, num_games: int = 1, **kwargs: Any) -> BatchedParallelEnv:
    """``num_games`` games of ``env_id`` as one batched PettingZoo ``ParallelEnv``."""
    return BatchedParallelEnv(env_id, num_games, **kwargs)
