"""Run outputs: JSON-lines metrics, TensorBoard (imported lazily) and episode statistics
accumulated on the device. The progress display is :mod:`gpu_vecenv.train.progress`."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from gpu_vecenv.train import distributed


class EpisodeStats:
    """Per-slot running return and length; completed episodes are summed on the device
    and read (one sync) by :meth:`read`. Shapes: ``(N,)`` per slot, ``(3,)`` totals.

    ``masked`` (a multi-agent env): :meth:`update` takes the env's ``info["active"]``,
    and the steps a slot spends idle (its agent left the game, which has not reset yet)
    count in no episode's length.

    A step is four small kernels (the roll-out runs one step per env step; masked: five,
    with the copy of ``active``): the running sums (one multi-tensor add), the ended
    episodes' sums added per slot (a select and an add) and the reset of the ended slots;
    the sum over the slots waits for :meth:`read`.
    """

    def __init__(self, num_slots: int, device: torch.device, masked: bool = False):
        # One (3, N) buffer: the running return, the running length and ones, so that a
        # step's three sums (return, length, count of the episodes that end) are one
        # select and one add, and the reset of the ended slots one fill.
        self._rows = torch.zeros(3, num_slots, device=device)
        self._rows[2] = 1.0
        self.running_return = self._rows[0]
        self.running_length = self._rows[1]
        # per slot: [sum of returns, sum of lengths, episodes] of the episodes ended since
        # the last read
        self._ended = torch.zeros(3, num_slots, device=device)
        # whether each slot's current observation is live (all are after a reset)
        self.live = torch.ones(num_slots, device=device) if masked else None
        self._ones = self._rows[2]  # a step's length increment where not masked

    @property
    def totals(self) -> torch.Tensor:
        """``(3,)``: [sum of returns, sum of lengths, episodes] ended since the last
        :meth:`read` (a new tensor)."""
        return self._ended.sum(1)

    def update(self, reward: torch.Tensor, done: torch.Tensor,
               active: torch.Tensor | None = None) -> None:
        """One env step: ``reward``, ``done`` ``(N,)``; ``active`` ``(N,)`` bool, which
        slots' new observations are live (given exactly when ``masked``). Each may also
        be a policy's block of the vector's rows, ``(games, agents)`` with ``games *
        agents = N`` (:meth:`gpu_vecenv.train.policies.PolicyGroup.select`)."""
        if (active is None) != (self.live is None):
            raise ValueError("EpisodeStats.update: pass active exactly when masked")
        shape = reward.shape
        rows = self._rows.view(3, *shape)  # running return, running length, ones
        length_step = (self._ones if self.live is None else self.live).view(shape)
        torch._foreach_add_([rows[0], rows[1]], [reward, length_step])
        if self.live is not None:
            self.live.view(active.shape).copy_(active)
        # the ended episodes' sums (a select, not ``rows * done``: a NaN return of an
        # episode still running must not reach them)
        self._ended.view(3, *shape).add_(torch.where(done, rows, 0.0))
        rows[:2].masked_fill_(done, 0.0)

    def read(self) -> dict[str, float] | None:
        """Mean return/length of the episodes finished since the last read (or None)."""
        totals = self.totals
        distributed.all_reduce_sum_(totals)  # every rank's episodes (data-parallel)
        ret, length, count = totals.tolist()
        self._ended.zero_()
        if count == 0:
            return None
        return {"episode_return": ret / count, "episode_length": length / count,
                "episodes": count}

    def state_dict(self) -> dict[str, torch.Tensor]:
        # The ended episodes' sums over the slots (3,): a checkpoint's format does not
        # depend on how the steps add them up.
        state = {"running_return": self.running_return.clone(),
                 "running_length": self.running_length.clone(), "totals": self.totals}
        if self.live is not None:
            state["live"] = self.live.clone()
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.running_return.copy_(state["running_return"])
        self.running_length.copy_(state["running_length"])
        self._ended.zero_()
        self._ended[:, 0] = state["totals"]  # read() sums the slots
        if self.live is not None:  # checkpoints from before masking: all live
            live = state.get("live")
            self.live.copy_(live if live is not None else torch.ones_like(self.live))


class IterationTimer:
    """Wall-clock windows for the logged rows: seconds since the run started, env steps
    per second and seconds spent in each phase (roll-out, update) since the last row.

    Args:
        global_step: env steps done when the run (re)starts.
        sync: called at the end of each phase (``trainer.sync_timing`` on a GPU: a device
            sync, so a phase's time is the GPU's, not the time to queue its kernels).
    """

    def __init__(self, global_step: int, sync: Callable[[], None] | None = None):
        self.sync = sync
        self.start = time.perf_counter()
        self._window_start, self._window_step = self.start, global_step
        self._phase_seconds = {"rollout": 0.0, "update": 0.0}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as phase ``name`` (``rollout`` or ``update``)."""
        start = time.perf_counter()
        yield
        if self.sync is not None:
            self.sync()
        self._phase_seconds[name] += time.perf_counter() - start

    def read(self, global_step: int) -> dict[str, float]:
        """``time``, ``steps_per_second``, ``rollout_seconds``, ``update_seconds`` (row
        keys) for the window that ends now, at ``global_step``; starts the next window."""
        now = time.perf_counter()
        rate = (global_step - self._window_step) / max(now - self._window_start, 1e-9)
        row = {"time": round(now - self.start, 4), "steps_per_second": rate,
               **{f"{name}_seconds": s for name, s in self._phase_seconds.items()}}
        self._window_start, self._window_step = now, global_step
        self._phase_seconds = {"rollout": 0.0, "update": 0.0}
        return row

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self.start


# Row keys that TensorBoard shows under charts/ (the rest of a learner's metrics go under
# losses/); keys it does not get at all: the x axis is the step, and TensorBoard keeps the
# wall time of every point itself.
_CHART_KEYS = {"episode_return", "episode_length", "episodes", "learning_rate",
               "steps_per_second", "rollout_seconds", "update_seconds"}
_NOT_PLOTTED = {"global_step", "iteration", "time"}


def tensorboard_tag(key: str) -> str | None:
    """The TensorBoard tag of a ``metrics.jsonl`` key, grouped as CleanRL does:
    ``episode_return`` -> ``charts/episode_return``, ``policy_loss`` ->
    ``losses/policy_loss``, ``tagger/policy_loss`` -> ``losses/tagger/policy_loss``;
    ``None`` for the counters that are not curves (``iteration``, ``time``)."""
    if key in _NOT_PLOTTED:
        return None
    policy, _, name = key.rpartition("/")
    group = "charts" if name in _CHART_KEYS else "losses"
    return f"{group}/{policy}/{name}" if policy else f"{group}/{name}"


class MetricsWriter:
    """Appends one JSON object per line to ``metrics.jsonl`` (flat keys, as logged) and
    mirrors scalars to TensorBoard under grouped tags (:func:`tensorboard_tag`) when
    enabled (``tensorboard`` is imported only then)."""

    def __init__(self, run_dir: Path, tensorboard: bool, resume_step: int | None = None):
        self.path = run_dir / "metrics.jsonl"
        if resume_step is not None and self.path.exists():
            # Drop rows logged after the checkpoint we resume from: they will be redone.
            kept = [line for line in self.path.read_text().splitlines()
                    if line.strip() and json.loads(line).get("global_step", 0) <= resume_step]
            self.path.write_text("".join(line + "\n" for line in kept))
        self._file = self.path.open("a")
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise RuntimeError("TensorBoard logging needs the tensorboard package: pip "
                                   "install 'gpu-vecenv[train]', or set "
                                   "trainer.tensorboard=false") from exc
            self._tb = SummaryWriter(str(run_dir / "tensorboard"), purge_step=resume_step)

    def write(self, row: dict[str, Any]) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                 for k, v in row.items()}
        self._file.write(json.dumps(clean) + "\n")
        self._file.flush()
        if self._tb is not None:
            step = int(row["global_step"])
            for key, value in row.items():
                tag = tensorboard_tag(key)
                if tag is not None and isinstance(value, (int, float)) and \
                        not isinstance(value, bool):
                    self._tb.add_scalar(tag, value, step)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()


class NoMetricsWriter:
    """What ranks other than 0 of a data-parallel run write: nothing (rank 0 writes the
    run's rows)."""

    def write(self, row: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass
