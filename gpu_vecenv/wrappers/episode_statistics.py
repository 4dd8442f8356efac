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
        info["_episode"] = (n,) bool, True where an episode ended on this step

    with zeros where ``_episode`` is False (float32 instead of float64 on devices without
    float64, such as Apple's MPS). Tag's agent-slot view: an idle slot (its agent left the
    game, ``info["active"]`` False) adds neither reward nor length.

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
        # Few, wide tensor ops per step (each op costs a launch on a GPU and a few us of
        # Python on the CPU): rows of one tensor are updated together.
        # (3, n): the running episode's return, length and start time per env
        self._running = torch.zeros(3, n, dtype=real, device=device)
        self._increment = torch.ones(2, n, dtype=real, device=device)  # (reward, 1)
        self.prev_dones = torch.zeros(n, dtype=torch.bool, device=device)
        # (return, length, time) of the latest episodes: a ring buffer whose extra last
        # row takes the writes of the envs whose episode did not end
        self._ring = torch.zeros(buffer_length + 1, 3, dtype=real, device=device)
        self._episodes = torch.zeros((), dtype=torch.int64, device=device)
        # for episode_summary(): return and length sums since the last clear, and the
        # episode count then
        self._summary_sums = torch.zeros(2, dtype=real, device=device)
        self._episodes_at_clear = torch.zeros((), dtype=torch.int64, device=device)

    @property
    def episode_returns(self) -> torch.Tensor:
        """``(num_envs,)`` the return so far of each env's running episode."""
        return self._running[0]

    @property
    def episode_lengths(self) -> torch.Tensor:
        """``(num_envs,)`` int64, the length so far of each env's running episode."""
        return self._running[1].to(torch.int64)

    @property
    def episode_start_times(self) -> torch.Tensor:
        """``(num_envs,)`` ``time.perf_counter()`` at the start of each running episode."""
        return self._running[2]

    # -- reset / step --

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env; restart the statistics of every env (or of the masked ones)."""
        restarted = self._reset_slots(options)
        obs, info = self.env.reset(seed=seed, options=options)
        now = time.perf_counter()
        if restarted is None:
            self._running[:2].zero_()
            self._running[2].fill_(now)
            self.prev_dones.zero_()
        else:
            self._running[:2].masked_fill_(restarted, 0.0)
            self._running[2].masked_fill_(restarted, now)
            self.prev_dones.masked_fill_(restarted, False)
        self._active_after(info)
        return obs, info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the env and add this step's rewards; see the class doc for ``info``."""
        live_before = self._last_active
        reports_liveness = live_before is not self._all_live
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        if not isinstance(info, dict):
            raise TypeError(
                f"RecordEpisodeStatistics needs a dict info, got {type(info).__name__} (is a "
                f"wrapper such as DictInfoToList inside it? Put it outside)"
            )
        if self._stats_key in info or f"_{self._stats_key}" in info:
            raise ValueError(
                f"info already has the key '{self._stats_key}' (or '_{self._stats_key}'): "
                f"{sorted(info)}"
            )
        now = time.perf_counter()
        running = self._running
        self._increment[0].copy_(torch.as_tensor(rewards))
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            counted = live_before if reports_liveness else None
        else:
            # the step after a done resets that env (NEXT_STEP) or follows a masked
            # reset (DISABLED): it belongs to no episode
            counted = ~self.prev_dones & live_before if reports_liveness else ~self.prev_dones
        if counted is None:
            running[:2].add_(self._increment)
        else:
            running[:2].add_(self._increment * counted)
            # an uncounted step (a reset step, or idle in Tag): the next episode starts now
            running[2].masked_fill_(~counted, now)

        dones = torch.as_tensor(terminations, device=self.device) | torch.as_tensor(
            truncations, device=self.device
        )
        ended = torch.where(dones, running, 0.0)  # (3, n): return, length, start time
        ended[2].sub_(now).neg_().mul_(dones)  # start time -> seconds since, where ended
        info = dict(info)
        info[self._stats_key] = {"r": ended[0], "l": ended[1].to(torch.int64), "t": ended[2]}
        info[f"_{self._stats_key}"] = dones
        self._record(dones, ended)

        # every mode restarts the counts now; NEXT_STEP's reset step is not counted
        running[:2].masked_fill_(dones, 0.0)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            running[2].masked_fill_(dones, now)
        self.prev_dones = dones
        self._active_after(info)
        return obs, rewards, terminations, truncations, info

    def _record(self, dones: torch.Tensor, ended: torch.Tensor) -> None:
        """Append the episodes that ended (``ended``: ``(3, n)`` return, length, time; in
        env order) to the ring buffer and the summary sums, on the device."""
        size = self.buffer_length
        rank = torch.cumsum(dones, dim=0)  # 1, 2, ... over this step's ended episodes
        # of more than `size` episodes in one step only the last `size` fit
        keep = dones & (rank > rank[-1] - size)
        position = rank + (self._episodes - 1)
        slot = torch.where(keep, position.remainder_(size), size)
        self._ring.index_put_((slot,), ended.T)
        self._episodes.add_(rank[-1])
        self._summary_sums.add_(ended[:2].sum(dim=1))

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
        count = self._episodes - self._episodes_at_clear
        count, return_sum, length_sum = torch.cat(
            [count.to(self._summary_sums.dtype).view(1), self._summary_sums]
        ).tolist()
        if clear:
            self._summary_sums.zero_()
            self._episodes_at_clear.copy_(self._episodes)
        mean_return = return_sum / count if count else math.nan
        mean_length = length_sum / count if count else math.nan
        return {"episodes": int(count), "mean_return": mean_return, "mean_length": mean_length}
