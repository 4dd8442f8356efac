"""Measuring a trainer at a given number of envs: peak memory, free memory and training
env-steps/s, for :mod:`gpu_vecenv.train.autoscale` (``num_envs: auto``).

:class:`Probe` builds the trainer of a config at a size (in a temporary run directory,
with no outputs), runs it for a few iterations and frees it again. It is given the
trainer class to build (the :class:`~gpu_vecenv.train.trainer.Trainer` passes itself
when it resolves ``num_envs: auto``), so this module and :mod:`.autoscale` sit below the
trainer and import nothing of it. :class:`MemoryMeter`
reads memory: on a CUDA device torch's peak allocation
(``torch.cuda.max_memory_allocated``, reset before each probe) and the GPU's free memory
(``torch.cuda.mem_get_info``); on the CPU (Linux) the peak resident set size
(``/proc/self/status`` ``VmHWM``, reset through ``/proc/self/clear_refs``) and
``MemAvailable``.
"""

from __future__ import annotations

import dataclasses
import gc
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gpu_vecenv.train.config import Config

TIMED_SECONDS = 1.0
"""Throughput: time about this long (at least 3 iterations) per size."""

MAX_TIMED_ITERATIONS = 1000
"""Throughput: time at most this many iterations per size."""


class Probe:
    """Builds the trainer of ``config`` at a given size on ``device`` and runs it: the
    measurements that :func:`gpu_vecenv.train.autoscale.search_memory` and
    :func:`~gpu_vecenv.train.autoscale.search_throughput` need. :meth:`close` removes
    its temporary run directory.

    ``trainer_class``: what builds a trainer from a config (``Trainer``): called as
    ``trainer_class(config)``, the result must have ``groups``, ``phases``, ``iteration``,
    ``global_step`` and ``batch`` as :class:`~gpu_vecenv.train.trainer.Trainer` has."""

    def __init__(self, config: Config, device: torch.device,
                 trainer_class: Callable[[Config], Any]):
        self.config = config
        self.device = device
        self.trainer_class = trainer_class
        self._tmp = tempfile.TemporaryDirectory(prefix="gpu_vecenv_autoscale_")

    def close(self) -> None:
        self._tmp.cleanup()

    def _build(self, num_envs: int):
        t = self.config.trainer
        # The update runs eagerly even where the run compiles it (trainer.compile_update):
        # a compile per probed size would take tens of seconds each, and the eager update
        # usually needs the more memory (the compiled one keeps fewer activations for the
        # backward), so the choice errs on the safe side.
        trainer_fields = dict(num_envs=num_envs, run_dir=str(Path(self._tmp.name) / "run"),
                              progress=False, tensorboard=False, checkpoint_interval=0,
                              eval_episodes=0, device=str(self.device), compile_update=False)
        config = dataclasses.replace(
            self.config, trainer=dataclasses.replace(t, **trainer_fields),
            # DDPG updates from the first iteration, so its update is measured too.
            ddpg=dataclasses.replace(self.config.ddpg, learning_starts=0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. the CPU size warning, once per probe
            return self.trainer_class(config)

    def _iterate(self, trainer, iterations: int) -> None:
        for _ in range(iterations):
            for g in trainer.groups:
                g.learner.begin_iteration(trainer.global_step, 0.0)
            trainer.phases.collect()
            trainer.phases.update()
            trainer.iteration += 1
            trainer.global_step += trainer.batch

    def _run(self, num_envs: int, iterations: int) -> None:
        trainer = None
        self.free_memory()  # what a failed probe left (its traceback has been dropped by now)
        try:
            trainer = self._build(num_envs)
            self._iterate(trainer, iterations)
            self._sync()
        finally:
            del trainer
            self.free_memory()

    def peak_bytes(self, num_envs: int) -> int:
        """Peak memory, above what was in use before, of building ``num_envs`` and
        running three iterations: as training runs them (the third captures the CUDA
        graphs, whose memory pools count too)."""
        from gpu_vecenv.train.graphs import WARMUP_ITERATIONS

        self.free_memory()
        meter = MemoryMeter(self.device)
        meter.reset()
        self._run(num_envs, WARMUP_ITERATIONS + 1)
        return meter.peak()

    def run(self, num_envs: int) -> None:
        """Build ``num_envs`` and run three iterations, unmeasured."""
        from gpu_vecenv.train.graphs import WARMUP_ITERATIONS

        self._run(num_envs, WARMUP_ITERATIONS + 1)

    def rate(self, num_envs: int) -> float:
        """Env-steps/s (vector slots x steps) of the training iterations at
        ``num_envs``, timed after a warm-up (the CUDA graphs captured)."""
        from gpu_vecenv.train.graphs import WARMUP_ITERATIONS

        trainer = None
        self.free_memory()  # what a failed probe left (its traceback has been dropped by now)
        try:
            trainer = self._build(num_envs)
            self._iterate(trainer, WARMUP_ITERATIONS + 1)
            self._sync()
            # As in training, the host only queues work: one sync after 3 iterations to
            # see how long they take, one after as many more as fill TIMED_SECONDS.
            start = time.perf_counter()
            self._iterate(trainer, 3)
            self._sync()
            first = time.perf_counter() - start
            more = min(MAX_TIMED_ITERATIONS, int(3 * TIMED_SECONDS / max(first, 1e-9))) - 3
            if more > 0:
                self._iterate(trainer, more)
                self._sync()
            seconds = time.perf_counter() - start
            return (3 + max(more, 0)) * trainer.batch / seconds
        finally:
            del trainer
            self.free_memory()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def free_memory(self) -> None:
        """Collect garbage (a failed probe's cycles) and give cached CUDA blocks back."""
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        else:
            _trim_heap()


def _trim_heap() -> None:
    """Give freed heap memory back to the OS (glibc), so that the resident set size
    measured next starts from what is in use; elsewhere nothing."""
    global _LIBC
    if _LIBC is None:
        import ctypes
        import ctypes.util

        try:
            _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _LIBC.malloc_trim  # noqa: B018 - glibc only
        except (OSError, AttributeError):
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)


_LIBC = None


class MemoryMeter:
    """Peak memory above the level at :meth:`reset` on ``device``, and free memory."""

    def __init__(self, device: torch.device):
        self.device = device
        self._base = 0

    def reset(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        else:
            Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
            self._base = _proc_status_bytes("VmRSS")

    def peak(self) -> int:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) - self._base
        return _proc_status_bytes("VmHWM") - self._base

    def free(self) -> int:
        """Bytes free now: the GPU's free memory, or the host's available RAM."""
        if self.device.type == "cuda":
            return torch.cuda.mem_get_info(self.device)[0]
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
        raise OSError("no MemAvailable in /proc/meminfo")


def _proc_status_bytes(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise OSError(f"no {key} in /proc/self/status")


def memory_is_measurable(device: torch.device) -> bool:
    """CUDA always; the CPU where Linux's ``/proc`` lets the peak be reset and read."""
    if device.type == "cuda":
        return True
    try:
        meter = MemoryMeter(device)
        meter.reset()
        meter.peak()
        meter.free()
        return True
    except OSError:
        return False
