"""One game of a multi-agent env (Tag, or one you registered) as a plain PettingZoo
``ParallelEnv`` with numpy values: :class:`OneGameParallelEnv`.

For tools that expect PettingZoo's usual contract (``parallel_api_test``, SuperSuit,
most MARL libraries): one game, numpy observations, Python rewards and flags, and
agents removed from ``agents`` as they leave the game (a tagged runner after the step
that tagged it; everyone when the game ends). It runs the torch reference on the CPU
by default. For thousands of games on a GPU use ``gpu_vecenv.parallel_env`` instead.

    from gpu_vecenv.adapters.pettingzoo import parallel_env
    env = parallel_env("GPUTag-v0", num_runners=5)
    obs, infos = env.reset(seed=0)
    while env.agents:
        actions = {a: env.action_space(a).sample() for a in env.agents}
        obs, rewards, terminations, truncations, infos = env.step(actions)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

try:
    from pettingzoo import ParallelEnv
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError("gpu_vecenv.adapters.pettingzoo needs pettingzoo: "
                      "pip install 'gpu-vecenv[pettingzoo]'") from exc

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.actions import ActionChecker


class OneGameParallelEnv(ParallelEnv):
    """One game of the multi-agent env ``env_id``, numpy in and out. Agents are named
    ``<role>_<i>`` after the env's roles (Tag: ``tagger_0 …``, ``runner_0 …``);
    ``infos[agent]["role"]`` is the agent's role.

    Args:
        env_id: a registered multi-agent id (``"GPUTag-v0"``, ``"GPUTagGrid-v0"``, yours).
        render_mode: ``None``, ``"rgb_array"`` or ``"human"`` (a window).
        device: torch device of the underlying env (default ``"cpu"``).
        backend: ``"torch"`` (default) or ``"cuda"``.
        **params: the env's parameters (or ``preset=``).
    """

    def __init__(self, env_id: str = "GPUTag-v0", render_mode: str | None = None,
                 device: str = "cpu", backend: str = "torch", **params: Any):
        from gpu_vecenv.entry_points import make_vec
        from gpu_vecenv.multi_agent import MultiAgentVectorEnv

        self._vec = make_vec(env_id, 1, device=device, backend=backend, strict=True,
                             autoreset_mode=AutoresetMode.DISABLED, render_mode=render_mode,
                             **params)
        if not isinstance(self._vec, MultiAgentVectorEnv):
            raise TypeError(f"{env_id} is a single-agent env; use gymnasium.make")
        self.params = self._vec.params
        self.possible_agents = list(self._vec.possible_agents)
        self.agents: list[str] = []
        self.render_mode = render_mode
        self.metadata = {"name": f"{self._vec.definition.name}_v0",
                         "render_modes": self._vec.metadata["render_modes"],
                         "render_fps": self._vec.metadata["render_fps"],
                         "is_parallelizable": True}
        self.observation_spaces = dict.fromkeys(self.possible_agents,
                                                self._vec.single_observation_space)
        self.action_spaces = dict.fromkeys(self.possible_agents,
                                           self._vec.single_action_space)
        self._index = {name: i for i, name in enumerate(self.possible_agents)}
        self._roles = dict(zip(self.possible_agents, self._vec.roles, strict=True))
        self._agent_action = ActionChecker(self._vec.single_action_space, 1, self._vec.device,
                                           batched=False)
        """Checks one agent's action (the vector env checks its value)."""
        self._noop = torch.zeros(self._agent_action.shape, dtype=self._agent_action.dtype,
                                 device=self._vec.device)

    def observation_space(self, agent: str):
        return self.observation_spaces[agent]

    def action_space(self, agent: str):
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start a new game. ``options`` is accepted and ignored (none are defined)."""
        obs, _ = self._vec.reset(seed=seed)
        self.agents = list(self.possible_agents)
        obs = obs.cpu().numpy()
        return ({a: obs[i] for a, i in self._index.items()},
                {a: {"role": self._roles[a]} for a in self.agents})

    def step(self, actions: dict[str, Any]):
        """Step the game; ``actions`` holds one action for every agent in ``agents``.
        Returns dicts over the agents that were live at the start of the step.

        Raises (before anything changes), naming the agent: ``TypeError`` for ``actions``
        that are not a dict, or an action that is not numbers or of the wrong dtype;
        ``ValueError`` for missing or unknown agents, a wrong shape, or an action out of
        the space (:class:`~gpu_vecenv.actions.InvalidActionError`).
        """
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions must be a dict {{agent: action}} over env.agents, "
                            f"got {type(actions).__name__}")
        live = list(self.agents)
        missing = [a for a in live if a not in actions]
        unknown = [a for a in actions if a not in self._index]
        if missing or unknown:
            raise ValueError(f"need one action for each agent in env.agents; missing "
                             f"{missing}, unknown {unknown}")
        check = self._agent_action.convert
        batch = torch.stack([check(actions[a], name=f"actions[{a!r}]") if a in live
                             else self._noop for a in self.possible_agents])
        obs, reward, terminated, truncated, _ = self._vec.step(batch)
        obs, reward = obs.cpu().numpy(), reward.cpu().numpy()
        terminated, truncated = terminated.cpu().numpy(), truncated.cpu().numpy()
        index = self._index
        out = ({a: obs[index[a]] for a in live},
               {a: float(reward[index[a]]) for a in live},
               {a: bool(terminated[index[a]]) for a in live},
               {a: bool(truncated[index[a]]) for a in live},
               {a: {"role": self._roles[a]} for a in live})
        self.agents = [a for a in live if not (terminated[index[a]] or truncated[index[a]])]
        return out

    def render(self):
        frames = self._vec.render()
        return None if frames is None else frames[0]

    def state(self) -> np.ndarray:
        """The game's state fields, concatenated (float32), for centralised critics."""
        values = self._vec.get_state()
        names = [f.name for f in self._vec.definition.agent_fields]
        names += [f.name for f in self._vec.definition.game_fields]
        return np.concatenate([values[n].reshape(-1).cpu().numpy().astype(np.float32)
                               for n in names])

    def close(self) -> None:
        self._vec.close()


def parallel_env(env_id: str = "GPUTag-v0", **kwargs: Any) -> OneGameParallelEnv:
    """One game of ``env_id`` as a numpy PettingZoo ``ParallelEnv``."""
    return OneGameParallelEnv(env_id, **kwargs)
