"""``NormalizeObservation``: observations scaled by running statistics kept on the device.

Gymnasium's ``gymnasium.wrappers.vector.NormalizeObservation`` with torch tensors: the same
constructor (``epsilon``), the same running statistics (:class:`RunningMeanStd`, updated
with every observation batch ``step`` and ``reset`` return), the same formula
``(obs - mean) / sqrt(var + epsilon)`` and the same ``update_running_mean`` switch. It
also works where Gymnasium's refuses:

- SAME_STEP autoreset: ``info["final_obs"]`` is normalized with the same statistics (the
  final observations do not update them; as SB3's ``VecNormalize`` does), so a value
  bootstrapped from it sees what the policy sees.
- Partial resets (``options={"reset_mask": m}``): only the observations of the reset
  envs update the statistics.
- Tag's agent-slot view: idle slots (``info["active"]`` False) neither update the
  statistics nor stop being zero.

``clip`` (off by default, as in Gymnasium) clips the result to ``[-clip, clip]``, as
SB3's ``VecNormalize`` (``clip_obs=10``) and CleanRL's scripts do.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gpu_vecenv.wrappers.base import TensorVectorWrapper, float_dtype
from gpu_vecenv.wrappers.running_mean_std import RunningMeanStd


class NormalizeObservation(TensorVectorWrapper):
    """Center each observation coordinate and scale it to unit variance.

    Args:
        env: one of our vector envs with Box observations (or a wrapper of one).
        epsilon: added to the variance under the square root (> 0).
        clip: if given, clip normalized observations to ``[-clip, clip]``.

    Attributes:
        obs_rms: the :class:`RunningMeanStd` of the observations (``mean`` and ``var`` of
            shape ``single_observation_space.shape``). Assign one wrapper's ``obs_rms`` to
            another (e.g. an evaluation env's) to share the statistics.
        update_running_mean: False freezes the statistics (e.g. for evaluation).

    Shapes: observations ``(num_envs, *obs_shape)`` float32 in and out.
    """

    def __init__(self, env: VectorEnv, epsilon: float = 1e-8, clip: float | None = None):
        if not epsilon > 0:
            raise gym.error.InvalidBound(f"epsilon must be > 0, got {epsilon}")
        if clip is not None and not clip > 0:
            raise gym.error.InvalidBound(f"clip must be > 0 or None, got {clip}")
        super().__init__(env)
        space = env.single_observation_space
        if not isinstance(space, gym.spaces.Box):
            raise TypeError(f"NormalizeObservation needs Box observations, got {space}")
        bound = np.inf if clip is None else clip
        self.single_observation_space = gym.spaces.Box(-bound, bound, space.shape, np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.epsilon = epsilon
        self.clip = clip
        self.obs_rms = RunningMeanStd(space.shape, self.device, dtype=float_dtype(self.device))
        self.update_running_mean = True

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset the env; the returned observations of the reset envs update the statistics."""
        restarted = self._reset_slots(options)
        obs, info = self.env.reset(seed=seed, options=options)
        active = self._active_after(info)
        if restarted is None:
            fresh = active
        else:
            fresh = restarted if active is None else restarted & active
        return self._normalize(obs, update=True, rows=fresh, live=active), info

    def step(self, actions: Any) -> tuple[torch.Tensor, Any, Any, Any, dict[str, Any]]:
        """Step the env and normalize ``obs`` (and ``info["final_obs"]`` in SAME_STEP)."""
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        active = self._active_after(info)
        obs = self._normalize(obs, update=True, rows=active, live=active)
        if self.autoreset_mode == AutoresetMode.SAME_STEP and "final_obs" in info:
            info = {**info, "final_obs": self._normalize(info["final_obs"], update=False)}
        return obs, rewards, terminations, truncations, info

    def _normalize(
        self,
        obs: torch.Tensor,
        update: bool,
        rows: torch.Tensor | None = None,
        live: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``obs`` ``(num_envs, *obs_shape)`` scaled by the statistics, after adding to them
        (if ``update`` and not frozen) the rows in ``rows`` (``None``: all). Where ``live``
        (``(num_envs,)`` bool, Tag's ``active``) is False the result stays zero."""
        obs = torch.as_tensor(obs, device=self.device)
        if update and self.update_running_mean:
            self.obs_rms.update(obs, mask=rows)
        rms = self.obs_rms
        scaled = (obs - rms.mean) / torch.sqrt(rms.var + self.epsilon)
        if self.clip is not None:
            scaled = scaled.clamp(-self.clip, self.clip)
        if live is not None:
            scaled = torch.where(live.view(-1, *([1] * (obs.dim() - 1))), scaled, 0.0)
        return scaled.to(torch.float32)
