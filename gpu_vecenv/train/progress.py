"""Training progress on stderr: a tqdm bar on a terminal, plain lines elsewhere.

Both move every iteration (the step count is known on the host without a sync); steps/s
and the return come from the logged rows (every ``log_interval`` iterations), which
read the device anyway. Without a terminal (``| tee``, ``nohup``, CI, Slurm) a bar would
print nothing useful, so a line such as::

    step 59,392/500,000 (12%) | 2,310 steps/s | return 212.4 | elapsed 26s | ETA 3m11s

is written every ``interval`` seconds instead.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def format_duration(seconds: float) -> str:
    """``59s``, ``3m11s``, ``2h05m``."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def format_returns(returns: dict[str, float] | None) -> str:
    """``212.4`` for the one policy of a single-agent run (``default``), ``tagger 3.21,
    runner -0.52`` per policy otherwise; ``-`` before the first finished episode."""
    if not returns:
        return "-"
    if list(returns) == ["default"]:
        return f"{returns['default']:.1f}"
    return ", ".join(f"{name} {value:.2f}" for name, value in returns.items())


class Progress:
    """Shows progress over ``total`` env steps, starting at ``initial`` (a resumed run).

    Args:
        enabled: ``False`` shows nothing (``trainer.progress``).
        total: the step count at the end of the run.
        initial: the step count now.
        interval: seconds between plain lines (not on a terminal); 0: every iteration.
        stream: where to write (default: ``sys.stderr``).
    """

    def __init__(
        self,
        enabled: bool,
        total: int,
        initial: int,
        interval: float = 5.0,
        stream: TextIO | None = None,
    ):
        self.stream = stream if stream is not None else sys.stderr
        self.total = total
        self.interval = interval
        self._bar = None
        self._lines = False
        self._rate: float | None = None
        self._returns: dict[str, float] | None = None
        self._start = self._last_time = time.monotonic()
        self._start_step = self._last_step = initial
        if not enabled:
            return
        if not _isatty(self.stream):
            self._lines = True
            return
        try:
            from tqdm import tqdm
        except ImportError:
            self._lines = True  # no tqdm: the plain lines still say where the run is
            return
        self._bar = tqdm(
            total=total,
            initial=initial,
            unit="step",
            unit_scale=True,
            dynamic_ncols=True,
            file=self.stream,
        )

    def set_stats(self, rate: float, returns: dict[str, float] | None) -> None:
        """The latest measured env-steps/s and mean returns (policy -> return)."""
        self._rate = rate
        if returns:
            self._returns = returns
        if self._bar is not None:
            postfix = {"steps/s": f"{rate:,.0f}"}
            if self._returns:
                postfix["return"] = format_returns(self._returns)
            self._bar.set_postfix(postfix, refresh=False)

    def update(self, global_step: int) -> None:
        """Called once per iteration with the env steps done so far."""
        if self._bar is not None:
            self._bar.update(global_step - self._bar.n)
        elif self._lines:
            now = time.monotonic()
            if now - self._last_time >= self.interval:
                self._print_line(global_step, now)

    def _print_line(self, step: int, now: float) -> None:
        # steps/s over the time since the previous line: recent, and measured on the host
        # like the ETA it feeds (the logged rate may be several lines old).
        rate = (step - self._last_step) / max(now - self._last_time, 1e-9)
        self._last_time, self._last_step = now, step
        if rate <= 0 and self._rate is not None:
            rate = self._rate
        eta = format_duration((self.total - step) / rate) if rate > 0 else "?"
        fraction = step / self.total if self.total else 1.0
        print(
            f"step {step:,}/{self.total:,} ({fraction:.0%}) | {rate:,.0f} steps/s | "
            f"return {format_returns(self._returns)} | "
            f"elapsed {format_duration(now - self._start)} | ETA {eta}",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or file-like stream without isatty
        return False
