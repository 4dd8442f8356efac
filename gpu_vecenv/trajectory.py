"""The storage a roll-out fills: ``T`` steps of ``N`` envs, preallocated on the env's device.

:func:`gpu_vecenv.capture_rollout` writes one :class:`Trajectory` in place on every call;
what it holds is what this eager loop collects::

    obs[0] = the observation the call starts from
    for t in range(T):
        actions[t] = policy(obs[t])
        obs[t + 1], rewards[t], terminated[t], truncated[t], info = env.step(actions[t])
        final_obs[t], active[t] = info["final_obs"], info["active"]  # where the env has them

with ``obs[T]`` kept apart as ``next_obs``, where the next call starts.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

OBS_ROW_ALIGNMENT = 64
"""float32 elements (256 bytes) to which every step's observations are aligned.

The policy reads ``obs[t]``. torch picks vectorized kernels, and cuBLAS its algorithms, by
the alignment of their operands, and some of those choices change how results round. An
eager loop hands the policy freshly allocated tensors (512-byte aligned), so each step's
rows here start as aligned as that, and the captured policy computes the same bits."""


@dataclass
class Trajectory:
    """``T`` steps of ``N`` envs (``N = env.num_envs``, slots for multi-agent envs).

    - ``obs``: ``(T, N, obs_dim)`` float32, the observation the policy acted on at step
      ``t``. Each ``obs[t]`` is contiguous and 256-byte aligned; unless ``N * obs_dim`` is
      a multiple of 64 the steps are padded apart, so flatten with ``reshape`` (a copy
      then), not ``view``.
    - ``actions``: ``(T, N, *action_shape)``, the env's canonical dtype (int64 for
      Discrete / MultiDiscrete, float32 for Box): what the env was given.
    - ``rewards``: ``(T, N)`` float32; ``terminated``, ``truncated``: ``(T, N)`` bool.
    - ``final_obs``: ``(T, N, obs_dim)`` float32 with ``autoreset_mode=SAME_STEP``
      (``info["final_obs"]``: the last observation of an episode that ended at ``t``),
      else ``None`` (with NEXT_STEP the last observation is ``obs[t + 1]`` itself).
    - ``active``: ``(T, N)`` bool for multi-agent slot views (``info["active"]`` after
      step ``t``: False for slots out of their game), else ``None``.
    - ``next_obs``: ``(N, obs_dim)`` float32, the observation after the last step.

    Every call of the roll-out overwrites these tensors: :meth:`clone` what you keep.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor | None
    active: torch.Tensor | None
    next_obs: torch.Tensor

    @classmethod
    def allocate(cls, num_steps: int, num_envs: int, obs_dim: int,
                 action_shape: tuple[int, ...], action_dtype: torch.dtype,
                 device: torch.device, with_final_obs: bool, with_active: bool
                 ) -> Trajectory:
        """Zeroed storage; ``action_shape`` is one env's (``()`` for Discrete)."""
        t, n = num_steps, num_envs

        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        # obs[0..T-1] and next_obs are the T + 1 rows of one padded block.
        row = n * obs_dim
        stride = -(-row // OBS_ROW_ALIGNMENT) * OBS_ROW_ALIGNMENT
        observations = zeros(t + 1, stride)[:, :row].view(t + 1, n, obs_dim)
        return cls(
            obs=observations[:t],
            actions=zeros(t, n, *action_shape, dtype=action_dtype),
            rewards=zeros(t, n),
            terminated=zeros(t, n, dtype=torch.bool),
            truncated=zeros(t, n, dtype=torch.bool),
            final_obs=zeros(t, n, obs_dim) if with_final_obs else None,
            active=zeros(t, n, dtype=torch.bool) if with_active else None,
            next_obs=observations[t],
        )

    @property
    def num_steps(self) -> int:
        """``T``."""
        return self.rewards.shape[0]

    @property
    def num_envs(self) -> int:
        """``N``."""
        return self.rewards.shape[1]

    def observation_rows(self) -> list[torch.Tensor]:
        """``[obs[0], ..., obs[T - 1], next_obs]``: step ``t`` reads row ``t`` and writes
        row ``t + 1``. Views, ``(N, obs_dim)`` each."""
        return [*self.obs.unbind(0), self.next_obs]

    def clone(self) -> Trajectory:
        """A copy in new tensors (contiguous), which later calls leave alone."""
        return Trajectory(**{f.name: None if getattr(self, f.name) is None
                             else getattr(self, f.name).clone() for f in fields(self)})
