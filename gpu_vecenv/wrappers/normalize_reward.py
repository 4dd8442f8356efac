"""``NormalizeReward``: rewards scaled by the running spread of discounted returns.

Gymnasium's ``gymnasium.wrappers.vector.NormalizeReward`` with torch tensors: the same
constructor (``gamma``, ``epsilon``), the same per-env discounted return
``G = G * gamma * (1 - terminated) + reward`` whose running variance (a
:class:`RunningMeanStd`) scales the reward, ``reward / sqrt(var + epsilon)``, the same
autoreset handling (NEXT_STEP and DISABLED skip the step after a done; SAME_STEP restarts
``G`` at once) and the same ``update_running_mean`` switch. No host sync.

Beyond Gymnasium: a partial reset restarts ``G`` of the reset envs only (Gymnasium's
restarts every env's); Tag's idle slots (``info["active"]`` False) are skipped; ``clip``
(off by default) clips the scaled reward to ``[-clip, clip]``, as SB3's ``VecNormalize``
(``clip_reward=10``) and CleanRL's scripts do.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from gpu_vecenv.wrappers.base import TensorVectorWrapper, float_dtype
from gpu_vecenv.wrappers.running_mean_std import RunningMeanStd


class NormalizeReward(TensorVectorWrapper):
    """Scale rewards so that their discounted sums have roughly unit variance.

    Args:
        env: one of our vector envs (or a wrapper of one).
        gamma: the discount of the return whose variance is tracked, in ``[0, 1]``.
        epsilon: added to the variance under the square root (> 0).
        clip: if given, clip scaled rewards to ``[-clip, clip]``.

    Attributes:
        return_rms: the :class:`RunningMeanStd` of the discounted returns (scalar).
        accumulated_reward: ``(num_envs,)`` the discounted return ``G`` of each env.
        update_running_mean: False freezes the statistics (e.g. for evaluation).

    Shapes: rewards ``(num_envs,)`` in; out ``(num_envs,)`` in the reward's dtype
    (float32 for our envs; Gymnasium's is float64).
    """

    def __init__(
        self, env: VectorEnv, gamma: float = 0.99, epsilon: float = 1e-8, clip: float | None = None
    ):
        if not 0 <= gamma <= 1:
            raise gym.error.InvalidBound(f"gamma must be in [0, 1], got {gamma}")
        if not epsilon > 0:
            raise gym.error.InvalidBound(f"epsilon must be > 0, got {epsilon}")
        if clip is not None and not clip > 0:
            raise gym.error.InvalidBound(f"clip must be > 0 or None, got {clip}")
        super().__init__(env)
        self.gamma = gamma
        self.epsilon = epsilon
        self.clip = clip
        real = float_dtype(self.device)
        self.return_rms = RunningMeanStd((), self.device, dtype=real)
        self.accumulated_reward = torch.zeros(self.num_envs, dtype=real, device=self.device)
        self._prev_dones = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self.update_running_mean = True

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env and restart the discounted return of every (or each masked) env."""
        restarted = self._reset_slots(options)
        obs, info = self.env.reset(seed=seed, options=options)
        if restarted is None:
            self.accumulated_reward.zero_()
            self._prev_dones.zero_()
        else:
            self.accumulated_reward.masked_fill_(restarted, 0.0)
            self._prev_dones.masked_fill_(restarted, False)
        self._active_after(info)
        return obs, info

    def step(self, actions: Any) -> tuple[Any, torch.Tensor, Any, Any, dict[str, Any]]:
        """Step the env; return its reward divided by the returns' running std."""
        live_before = self._last_active
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        reward = torch.as_tensor(rewards, device=self.device)
        terminated = torch.as_tensor(terminations, device=self.device)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            counted = live_before
        else:
            counted = live_before & ~self._prev_dones
        discounted = self.accumulated_reward * self.gamma * ~terminated + reward
        self.accumulated_reward.copy_(torch.where(counted, discounted, self.accumulated_reward))
        if self.update_running_mean:
            self.return_rms.update(self.accumulated_reward, mask=counted)
        self._prev_dones = terminated | torch.as_tensor(truncations, device=self.device)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            self.accumulated_reward.masked_fill_(self._prev_dones, 0.0)
        self._active_after(info)
        scaled = reward / torch.sqrt(self.return_rms.var + self.epsilon)
        if self.clip is not None:
            scaled = scaled.clamp(-self.clip, self.clip)
        dtype = reward.dtype if reward.is_floating_point() else torch.float32
        return obs, scaled.to(dtype), terminations, truncations, info
