"""``RecordEpisodeStatistics``: episode returns, lengths and times, kept on the device.

Gymnasium's ``gymnasium.wrappers.vector.RecordEpisodeStatistics`` with torch tensors: the
same constructor, the same ``info["episode"]`` layout (``"r"``, ``"l"``, ``"t"``, masked by
``info["_episode"]``) and the same handling of the three autoreset modes, with no host
sync in ``step()``. Two differences follow from that:

- ``info["episode"]`` and ``info["_episode"]`` are in every step's info (zeros and an
  all-False mask when no episode ended): deciding to leave them out would need a sync.
- ``return_queue``, ``length_queue`` and ``time_queue`` are tensors (oldest first) read
  from a ring buffer on the device, not deques; reading one syncs once.

For a training loop's progress line, :meth:`RecordEpisodeStatistics.episode_summary` gives
the mean return and length of the episodes finished since the last call, in one sync.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from gpu_vecenv.wrappers.base import TensorVectorWrapper, float_dtype


class RecordEpisodeStatistics(TensorVectorWrapper):
    """Track each env's episode return, length and wall time on the device.

    When an episode ends, its statistics are in the info of that step::

        info["episode"] = {"r": (n,) float64 return, "l": (n,) int64 length,
                           "t": (n,) float64 seconds since the episode began}

    (float32 instead of float64 on devices without float64, such as Apple's MPS)
        info["_episode"] = (n,) bool, True where an episode ended on this step

    (zeros where ``_episode`` is False). Tag's agent-slot view: an idle slot (its agent
    left the game, ``info["active"]`` False) adds neither reward nor length.

    Args:
        env: one of our vector envs (or a wrapper of one).
        buffer_length: how many of the latest episodes :attr:`return_queue`,
            :attr:`length_queue` and :attr:`time_queue` keep.
        stats_key: the info key (``"episode"``; the mask is ``"_" + stats_key``).

    Example::

        envs = RecordEpisodeStatistics(gym.make_vec("GPUCartPole-v1", num_envs=1024))
        ...
        obs, reward, terminated, truncated, info = envs.step(action)
        returns = info["episode"]["r"][info["_episode"]]   # a sync: log rarely
        print(envs.episode_summary())  # {'episodes': 312, 'mean_return': 87.4, ...}
    """

    def __init__(self, env: VectorEnv, buffer_length: int = 100, stats_key: str = "episode"):
        super().__init__(env)
        if (
            isinstance(buffer_length, bool)
            or not isinstance(buffer_length, int)
            or buffer_length < 1
        ):
            raise ValueError(f"buffer_length must be a positive int, got {buffer_length!r}")
        self.buffer_length = buffer_length
        self._stats_key = stats_key
        n, device, real = self.num_envs, self.device, float_dtype(self.device)
        self.episode_returns = torch.zeros(n, dtype=real, device=device)
        self.episode_lengths = torch.zeros(n, dtype=torch.int64, device=device)
        self.episode_start_times = torch.zeros(n, dtype=real, device=device)
        self.prev_dones = torch.zeros(n, dtype=torch.bool, device=device)
        # (return, length, time) of the latest episodes, a ring buffer whose extra last
        # row takes discarded writes; one tensor so that a step writes it in one launch
        self._ring = torch.zeros(buffer_length + 1, 3, dtype=real, device=device)
        self._episodes = torch.zeros((), dtype=torch.int64, device=device)
        # episodes finished since the last episode_summary(): count, return sum, length sum
        self._summary = torch.zeros(3, dtype=real, device=device)

    # -- reset / step --

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env; restart the statistics of every env (or of the masked ones)."""
        restarted = self._reset_slots(options)
        obs, info = self.env.reset(seed=seed, options=options)
        now = time.perf_counter()
        if restarted is None:
            self.episode_returns.zero_()
            self.episode_lengths.zero_()
            self.episode_start_times.fill_(now)
            self.prev_dones.zero_()
        else:
            self.episode_returns.masked_fill_(restarted, 0.0)
            self.episode_lengths.masked_fill_(restarted, 0)
            self.episode_start_times.masked_fill_(restarted, now)
            self.prev_dones.masked_fill_(restarted, False)
        self._active_after(info)
        return obs, info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the env and add this step's rewards; see the class doc for ``info``."""
        live_before = self._last_active
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        if not isinstance(info, dict):
            raise TypeError(
                f"RecordEpisodeStatistics needs a dict info, got "
                f"{type(info).__name__} (is a wrapper such as DictInfoToList "
                f"inside it? Put it outside)"
            )
        if self._stats_key in info or f"_{self._stats_key}" in info:
            raise ValueError(
                f"info already has the key '{self._stats_key}' (or "
                f"'_{self._stats_key}'): {sorted(info)}"
            )
        now = time.perf_counter()
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            counted = live_before
        else:
            # the step after a done resets that env (NEXT_STEP) or follows a masked
            # reset (DISABLED): it belongs to no episode
            counted = live_before & ~self.prev_dones
            self.episode_start_times.masked_fill_(self.prev_dones, now)
        reward = torch.as_tensor(rewards, device=self.device).to(self.episode_returns.dtype)
        self.episode_returns.add_(torch.where(counted, reward, 0.0))
        self.episode_lengths.add_(counted)

        dones = torch.as_tensor(terminations, device=self.device) | torch.as_tensor(
            truncations, device=self.device
        )
        elapsed = (now - self.episode_start_times).round(decimals=6)
        ended_returns = torch.where(dones, self.episode_returns, 0.0)
        ended_lengths = torch.where(dones, self.episode_lengths, 0)
        ended_times = torch.where(dones, elapsed, 0.0)
        info = dict(info)
        info[self._stats_key] = {"r": ended_returns, "l": ended_lengths, "t": ended_times}
        info[f"_{self._stats_key}"] = dones
        self._record(dones, ended_returns, ended_lengths, ended_times)

        # every mode restarts the counts now; NEXT_STEP's reset step is not counted
        self.episode_returns.masked_fill_(dones, 0.0)
        self.episode_lengths.masked_fill_(dones, 0)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            self.episode_start_times.masked_fill_(dones, now)
        self.prev_dones = dones
        self._active_after(info)
        return obs, rewards, terminations, truncations, info

    def _record(
        self, dones: torch.Tensor, returns: torch.Tensor, lengths: torch.Tensor, times: torch.Tensor
    ) -> None:
        """Append the episodes that ended (in env order) to the ring buffer and the
        summary, on the device."""
        size = self.buffer_length
        rank = torch.cumsum(dones, dim=0) - 1  # order of each ended episode in this step
        ended = rank[-1] + 1
        # of more than `size` episodes in one step only the last `size` fit
        keep = dones & (rank >= ended - size)
        slot = torch.where(keep, (self._episodes + rank) % size, size)
        values = torch.stack([returns, lengths.to(returns.dtype), times], dim=1)
        self._ring.index_put_((slot,), values)
        self._episodes.add_(ended)
        self._summary.add_(torch.cat([ended.to(returns.dtype).view(1), values[:, :2].sum(dim=0)]))

    # -- reading the statistics (each reads the device once) --

    @property
    def episode_count(self) -> int:
        """Episodes finished since the wrapper was made."""
        return int(self._episodes)

    def _latest(self, column: int) -> torch.Tensor:
        total = int(self._episodes)
        size = self.buffer_length
        count = min(total, size)
        order = (total - count + torch.arange(count, device=self.device)) % size
        return self._ring[order, column]

    @property
    def return_queue(self) -> torch.Tensor:
        """Returns of the last ``buffer_length`` episodes, oldest first, ``(k,)`` float64."""
        return self._latest(0)

    @property
    def length_queue(self) -> torch.Tensor:
        """Lengths of the last ``buffer_length`` episodes, oldest first, ``(k,)`` int64."""
        return self._latest(1).to(torch.int64)

    @property
    def time_queue(self) -> torch.Tensor:
        """Wall times (s) of the last ``buffer_length`` episodes, oldest first."""
        return self._latest(2)

    def episode_summary(self, clear: bool = True) -> dict[str, float]:
        """``{"episodes": k, "mean_return": ..., "mean_length": ...}`` over the ``k``
        episodes finished since the last call with ``clear=True`` (NaN means when
        ``k == 0``). One host sync."""
        count, return_sum, length_sum = self._summary.tolist()
        if clear:
            self._summary.zero_()
        mean_return = return_sum / count if count else math.nan
        mean_length = length_sum / count if count else math.nan
        return {"episodes": int(count), "mean_return": mean_return, "mean_length": mean_length}
