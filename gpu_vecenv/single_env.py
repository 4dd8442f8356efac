"""A one-env ``gymnasium.Env`` view of a vector env: what ``gymnasium.make(id)`` returns.

It runs the torch backend on the CPU by default and speaks numpy, as Gymnasium's own
envs do, so it passes ``gymnasium.utils.env_checker.check_env``. The time limit is left
to Gymnasium's ``TimeLimit`` wrapper, which ``gymnasium.make`` adds from the registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from gpu_vecenv.actions import ActionChecker
from gpu_vecenv.definition import EnvDefinition
from gpu_vecenv.env_ids import load_definition


def multi_agent_message(env_id: str) -> str:
    """What to use instead of ``gymnasium.make`` for a multi-agent id."""
    return (f"{env_id} is a multi-agent env (several agents per game); gymnasium.make "
            f"builds a single-agent Env. Use gymnasium.make_vec({env_id!r}, num_games=G) "
            f"(one vector slot per agent), gpu_vecenv.parallel_env({env_id!r}, num_games=G) "
            f"(a batched PettingZoo ParallelEnv of tensors), or "
            f"gpu_vecenv.adapters.pettingzoo.parallel_env({env_id!r}) (one game, numpy).")


class SingleEnvView(gym.Env):
    """One copy of a registered single-agent env, numpy in and out.

    Args:
        env_id: a registered id, e.g. ``"GPUCartPole-v1"``.
        render_mode: ``None``, ``"rgb_array"`` or ``"human"`` (a window, drawn after
            every ``reset()`` / ``step()``).
        device: torch device of the underlying env (default ``"cpu"``).
        **params: fields of the env's params dataclass.
    """

    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 50}

    def __init__(self, env_id: str, render_mode: str | None = None, device: str = "cpu",
                 **params: Any):
        from gpu_vecenv.vector_env import GpuVectorEnv

        definition = load_definition(env_id)
        if not isinstance(definition, EnvDefinition):
            # A game of many agents is not one gymnasium.Env: its agents act at once and
            # leave one by one, which PettingZoo's ParallelEnv expresses and Env cannot.
            raise TypeError(multi_agent_message(env_id))
        self._vec = GpuVectorEnv(
            definition, 1, device=device, autoreset_mode=AutoresetMode.DISABLED,
            max_episode_steps=None, strict=True, render_mode=render_mode, **params,
        )
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space
        self.render_mode = render_mode
        self.metadata = {"render_modes": self._vec.metadata["render_modes"],
                         "render_fps": definition.render_fps}
        self.params = self._vec.params
        self._action = ActionChecker(self.action_space, 1, self._vec.device, batched=False)
        """Checks ``step()``'s one action (the vector env checks its value)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        obs, _ = self._vec.reset(seed=seed, options=options)
        return obs[0].cpu().numpy(), {}

    def step(self, action: Any):
        """One step; ``action`` is one action of ``action_space`` (numpy, a tensor or a
        Python number). A bad one raises before anything changes, as for the vector env."""
        batched = self._action.convert(action, name="action")[None]
        obs, reward, terminated, truncated, _ = self._vec.step(batched)
        return (obs[0].cpu().numpy(), float(reward[0]), bool(terminated[0]),
                bool(truncated[0]), {})

    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called without render_mode; pass render_mode='rgb_array'")
            return None
        frames = self._vec.render()
        return None if frames is None else frames[0]

    def get_state(self) -> dict[str, Any]:
        """The state of the one env (see ``GpuVectorEnv.get_state``), as Python numbers."""
        return {k: v[0].item() for k, v in self._vec.get_state().items()}

    def set_state(self, state: dict[str, Any]) -> np.ndarray:
        """Overwrite state fields (scalars; validated as by ``GpuVectorEnv.set_state``);
        returns the new observation."""
        if not isinstance(state, Mapping):
            raise TypeError(f"state must be a dict {{key: number}}, got {type(state).__name__}")
        obs = self._vec.set_state({k: np.asarray([v]) for k, v in state.items()})
        return obs[0].cpu().numpy()

    def close(self):
        self._vec.close()
