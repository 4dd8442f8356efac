"""A vector env that replays a written-out script, as numpy arrays (for Gymnasium's own
wrappers) or torch tensors (for ours), so both can be run on the same numbers.

``device="meta"`` gives tensors without data: any wrapper that reads a value back to the
host (``bool()``, ``.item()``, boolean indexing, numpy) fails on them, as it would sync
(or fail) on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode


@dataclass
class Script:
    """What the env returns: ``reset()`` gives ``obs[0]``; step ``t`` gives ``obs[t + 1]``,
    ``reward[t]``, ``terminated[t]``, ``truncated[t]`` (and ``final_obs[t]`` in SAME_STEP;
    ``active[t + 1]`` in info when given, ``active[0]`` from reset)."""

    obs: np.ndarray  # (T + 1, n, d) float32
    reward: np.ndarray  # (T, n) float32
    terminated: np.ndarray  # (T, n) bool
    truncated: np.ndarray  # (T, n) bool
    final_obs: np.ndarray | None = None  # (T, n, d)
    active: np.ndarray | None = None  # (T + 1, n) bool

    @property
    def num_envs(self) -> int:
        return self.reward.shape[1]


def random_script(
    steps: int, num_envs: int, obs_dim: int = 3, done_rate: float = 0.15, seed: int = 0
) -> Script:
    """Random observations (not centred, not unit scale), rewards and done flags."""
    rng = np.random.default_rng(seed)
    obs = (rng.normal(2.0, 3.0, (steps + 1, num_envs, obs_dim))).astype(np.float32)
    reward = rng.normal(1.0, 2.0, (steps, num_envs)).astype(np.float32)
    terminated = rng.random((steps, num_envs)) < done_rate
    truncated = (rng.random((steps, num_envs)) < done_rate / 2) & ~terminated
    final_obs = rng.normal(-1.0, 1.0, (steps, num_envs, obs_dim)).astype(np.float32)
    return Script(obs, reward, terminated, truncated, final_obs)


class ScriptedVectorEnv(gym.vector.VectorEnv):
    """Replays a :class:`Script` in autoreset mode ``mode``, as numpy (``device=None``) or
    torch tensors on ``device``. Records the options of every reset in ``resets``.
    ``games=(G, A)`` lays the slots out as Tag's view does (``num_games``, ``num_agents``);
    ``action_space`` (one env's) defaults to ``Discrete(2)``."""

    def __init__(
        self,
        script: Script,
        mode: AutoresetMode,
        device: str | None = None,
        games: tuple[int, int] | None = None,
        action_space: gym.Space | None = None,
        obs_bound: float = np.inf,
    ):
        self.script = script
        self.num_envs = script.num_envs
        self.device = None if device is None else torch.device(device)
        self.metadata = {"autoreset_mode": mode, "render_fps": 10}
        self.render_mode = None
        if games is not None:
            self.num_games, self.num_agents = games
        obs_dim = script.obs.shape[2]
        self.single_observation_space = gym.spaces.Box(
            -obs_bound, obs_bound, (obs_dim,), np.float32
        )
        self.single_action_space = action_space or gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, self.num_envs
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self.t = 0
        self.resets: list[dict[str, Any] | None] = []

    def _out(self, array: np.ndarray) -> Any:
        if self.device is None:
            return array.copy()
        if self.device.type == "meta":
            return torch.empty(array.shape, dtype=torch.from_numpy(array).dtype, device="meta")
        return torch.as_tensor(array.copy(), device=self.device)

    def _info(self, row: int) -> dict[str, Any]:
        if self.script.active is None:
            return {}
        return {"active": self._out(self.script.active[row])}

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None):
        self.resets.append(options)
        return self._out(self.script.obs[self.t]), self._info(self.t)

    def step(self, actions: Any):
        s, t = self.script, self.t
        self.t += 1
        info = self._info(self.t)
        if self.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP:
            done = s.terminated[t] | s.truncated[t]
            info.update(final_obs=self._out(s.final_obs[t]), _final_obs=self._out(done))
        return (
            self._out(s.obs[t + 1]),
            self._out(s.reward[t]),
            self._out(s.terminated[t]),
            self._out(s.truncated[t]),
            info,
        )
