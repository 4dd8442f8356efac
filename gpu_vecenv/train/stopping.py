"""Why a run ends before ``total_steps``: the return threshold, and Ctrl-C.

**The return threshold** (``trainer.stop_at_return``, like SB3's
``StopTrainingOnRewardThreshold``). A logged row carries the mean return of the episodes
that finished since the previous row; a :class:`ReturnWindow` keeps the newest rows that
together hold at least :data:`RECENT_EPISODES` episodes, so the decision rests on the last
100 or more episodes (Gymnasium's CartPole-v1 threshold of 475 is defined over 100
consecutive episodes; SB3's ``ep_rew_mean`` is the mean of the last 100) instead of the
handful one row may hold. The check runs at every logged row, so it costs no extra read
of the device and a run that stops computed exactly what the full run computed up to
that step.

**Ctrl-C and SIGTERM.** A signal in the middle of an iteration would leave the roll-out
storage or the weights half-updated, and a checkpoint of that state would not resume
exactly. So the first SIGINT (Ctrl-C) or SIGTERM (what Slurm, Kubernetes and ``torchrun``
send before they kill a job) only asks the loop to stop at the next iteration boundary,
where it saves a checkpoint and raises :class:`TrainingInterrupted`; a second one quits at
once (:class:`Interrupted`), without saving. A SIGTERM that follows the first within
:data:`DUPLICATE_SIGTERM_S` counts as the same request: under Slurm a worker of ``torchrun``
gets the scheduler's SIGTERM and the one ``torchrun`` forwards.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

RECENT_EPISODES = 100
"""Finished episodes (at least) that the mean return of the threshold is taken over."""


class ReturnWindow:
    """The mean return of one policy's most recent finished episodes.

    Holds ``(sum of returns, episodes)`` per logged row, newest last, and drops the
    oldest row while the newer ones still hold ``episodes`` or more."""

    def __init__(self, episodes: int = RECENT_EPISODES):
        self.episodes = episodes
        self.rows: list[tuple[float, float]] = []

    def add(self, mean_return: float, count: float) -> None:
        """A logged row's mean return over its ``count`` finished episodes."""
        if count <= 0:
            return
        self.rows.append((mean_return * count, count))
        while len(self.rows) > 1 and sum(c for _, c in self.rows[1:]) >= self.episodes:
            self.rows.pop(0)

    @property
    def count(self) -> int:
        """Episodes the mean is taken over."""
        return int(round(sum(c for _, c in self.rows)))

    def mean(self) -> float | None:
        """The mean return of those episodes (``None`` before the first one)."""
        count = sum(c for _, c in self.rows)
        return sum(s for s, _ in self.rows) / count if count else None

    def full(self) -> bool:
        """Whether the window holds at least ``episodes`` episodes."""
        return self.count >= self.episodes

    def state(self) -> list[list[float]]:
        return [[s, c] for s, c in self.rows]

    def load(self, rows: list[list[float]]) -> None:
        self.rows = [(float(s), float(c)) for s, c in rows]


def thresholds_by_policy(
    stop_at_return: float | dict | None, policies: list[str]
) -> dict[str, float]:
    """``trainer.stop_at_return`` as policy -> threshold (empty: no threshold).

    A number fits a run with one policy, a mapping one with several; anything else is a
    ``ValueError`` that says what to write."""
    if stop_at_return is None:
        return {}
    if isinstance(stop_at_return, dict):
        if len(policies) == 1:
            raise ValueError(
                f"trainer.stop_at_return: this run has one policy; give a number "
                f"(e.g. 475), not {stop_at_return!r}"
            )
        unknown = sorted(set(stop_at_return) - set(policies))
        if unknown:
            raise ValueError(
                f"trainer.stop_at_return names unknown policies {unknown}; "
                f"policies: {', '.join(policies)}"
            )
        return {name: float(stop_at_return[name]) for name in policies if name in stop_at_return}
    if len(policies) > 1:
        raise ValueError(
            f"trainer.stop_at_return: this run has policies "
            f"{', '.join(policies)}; give a threshold per policy, e.g. "
            f"{{{policies[0]}: {stop_at_return:g}}}"
        )
    return {policies[0]: float(stop_at_return)}


def threshold_reached(windows: dict[str, ReturnWindow], thresholds: dict[str, float]) -> bool:
    """Every policy with a threshold has a full window whose mean reaches it."""
    if not thresholds:
        return False
    for name, threshold in thresholds.items():
        window = windows[name]
        mean = window.mean()
        if not window.full() or mean is None or mean < threshold:
            return False
    return True


class TrainingInterrupted(KeyboardInterrupt):
    """A signal (Ctrl-C, SIGTERM) stopped training at an iteration boundary, after saving a
    checkpoint; ``signum`` says which.

    A ``KeyboardInterrupt``, so a script that does not catch it stops as on any Ctrl-C."""

    def __init__(self, run_dir: Path, global_step: int, checkpoint: Path,
                 signum: int = signal.SIGINT):
        super().__init__(
            f"training interrupted at step {global_step:,}; checkpoint saved to {checkpoint}"
        )
        self.run_dir = run_dir
        self.global_step = global_step
        self.checkpoint = checkpoint
        self.signum = int(signum)


class Interrupted(KeyboardInterrupt):
    """A second Ctrl-C or SIGTERM: quit at once, without saving (``signum``: the second
    signal)."""

    def __init__(self, signum: int):
        super().__init__(f"{signal.Signals(signum).name} again: quitting without saving")
        self.signum = int(signum)


DUPLICATE_SIGTERM_S = 1.0
"""A SIGTERM this soon after the first one is the same request delivered twice."""

_DEFAULT_HANDLERS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


class InterruptRequest:
    """A context manager that turns the first SIGINT or SIGTERM into ``requested = True``
    (``signum``, ``when``: which and at what ``time.monotonic()``; a one-line notice on
    stderr) and a second one into :class:`Interrupted`; the previous handlers are put back
    on leaving.

    It does nothing outside the main thread, and leaves alone a signal someone else
    handles (only Python's default handlers are replaced)."""

    def __init__(self, quiet: bool = False) -> None:
        self.requested = False
        self.signum: int | None = None
        self.when: float | None = None
        self.quiet = quiet  # no notice (ranks > 0 of a data-parallel run)
        self._previous: dict[int, object] = {}

    def __enter__(self) -> InterruptRequest:
        if threading.current_thread() is threading.main_thread():
            for signum, default in _DEFAULT_HANDLERS.items():
                if signal.getsignal(signum) is default:
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        now = time.monotonic()
        if self.requested:
            if signum == signal.SIGTERM == self.signum and now - self.when < DUPLICATE_SIGTERM_S:
                return
            raise Interrupted(signum)
        self.requested, self.signum, self.when = True, signum, now
        if self.quiet:
            return
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        print(
            f"\n{name}: saving a checkpoint at the end of this iteration (Ctrl-C or SIGTERM "
            "again to quit without saving)",
            file=sys.stderr,
            flush=True,
        )

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}


def check_with_evaluation(config, groups: list, thresholds: dict[str, float],
                          device, rank: int = 0
                          ) -> tuple[bool, dict[str, float], dict[str, Any]]:
    """``trainer.stop_check_episodes``: play that many episodes of the deterministic
    policy, the evaluation after training, now (rank 0 plays, every rank gets its result),
    and whether each policy's mean return (per agent, with several) reaches its threshold.
    Changes no state of the run: the evaluation has its own env and seed, and the RNG
    states are restored after it. Returns ``(passed, returns by policy, evaluation)``."""
    import torch

    from gpu_vecenv.train import distributed
    from gpu_vecenv.train.evaluation import evaluate

    evaluation = None
    if rank == 0:
        cuda = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            evaluation = evaluate(config, groups, config.trainer.stop_check_episodes, device)
    evaluation = distributed.broadcast_object(evaluation)
    single = len(groups) == 1
    returns = {name: evaluation["mean_return"] if single
               else evaluation["policies"][name]["mean_return_per_agent"]
               for name in thresholds}
    passed = all(returns[name] >= threshold for name, threshold in thresholds.items())
    return passed, returns, evaluation
