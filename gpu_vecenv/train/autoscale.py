"""``trainer.num_envs: auto``: choosing the number of envs for the device.

Memory (``trainer.autoscale: memory``, the default): after an unmeasured warm-up, the
trainer is built at two small sizes and run for three iterations as training runs them
(roll-outs and updates; the third captures the CUDA graphs, whose memory counts too), the
peak memory of each is measured, and a line ``bytes = fixed + per_env * num_envs`` is
fitted through them. The choice is the largest power of two whose predicted bytes fit
``autoscale_memory_fraction`` of the memory that was free before, at most
``autoscale_max_envs``. It is then verified the same way; out of memory halves it and
tries again.

Throughput (``trainer.autoscale: throughput``): from a small power of two up to the
memory choice, each size is built, warmed up and timed for a few iterations; the search
stops at the first doubling that adds less than :data:`MIN_GAIN` env-steps/s and
chooses the size before it.

How memory and speed are measured (on a CUDA device torch's peak allocation against the
GPU's free memory; on the CPU the peak resident set size against the available RAM) is
:mod:`gpu_vecenv.train.probe`'s. Everything is per device, so with several ranks each
chooses for its own GPU (:func:`resolve_num_envs` takes a function to agree on one
number). Besides ``autoscale_max_envs``, the choice stays within :data:`MAX_ROLLOUT_ROWS`
(PPO, A2C), one step of every slot in DDPG's replay buffer, and on the CPU below
:data:`CPU_MAX_SLOTS` vector slots: there time, not memory, is the limit.

The search functions (:func:`fit_memory`, :func:`search_memory`,
:func:`search_throughput`) take their measurements as functions, so they are tested
with made-up numbers; :func:`choose_num_envs` gives them the real ones. It is given the
trainer class to measure (the :class:`~gpu_vecenv.train.trainer.Trainer`, which calls
:func:`resolve_num_envs` as it is built, passes itself), so this module sits below it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gpu_vecenv.train.config import Config
from gpu_vecenv.train.probe import MemoryMeter, Probe, memory_is_measurable

MIN_GAIN = 0.10
"""Throughput mode: the least relative gain in env-steps/s for a doubling to be taken."""

PROBE_SLOTS = {"cuda": (16384, 65536), "cpu": (512, 2048)}
"""Vector slots of the two memory probes by device type (as envs: divided by the agents
per env and rounded down to a power of two; within the cap). Large enough on a GPU that
the allocator's rounding (to 512 bytes, 2 MiB segments) is small against the slope."""

THROUGHPUT_START_SLOTS = 1024
"""Throughput mode starts at this many vector slots (as envs, like :data:`PROBE_SLOTS`),
or at a quarter of the memory choice if that is smaller."""

CPU_MAX_SLOTS = 4096
"""On the CPU, auto chooses fewer vector slots than this (the size from which the trainer
warns that a run is sized for a GPU: ``trainer.CPU_SLOTS_WARNING``)."""

MAX_ROLLOUT_ROWS = 2**31 - 1
"""PPO/A2C: the most roll-out rows (vector slots x ``num_steps``) auto chooses; the fused
PPO kernels index rows with 32-bit ints."""


class OutOfMemory(Exception):
    """A probe ran out of memory (raised by the measuring functions given to the search
    functions; :func:`is_out_of_memory` tells which real errors are that)."""


def is_out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an error it was raised from or while handling (an out of
    memory inside a CUDA graph capture surfaces as the failed capture), means the device
    (or the host) ran out of memory."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (OutOfMemory, torch.cuda.OutOfMemoryError, MemoryError)):
            return True
        text = str(exc)
        if isinstance(exc, RuntimeError) and (
                "out of memory" in text or "can't allocate memory" in text):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def power_of_two_floor(x: float) -> int:
    """The largest power of two ``<= x`` (1 for ``x < 2``)."""
    return 1 << max(0, int(x).bit_length() - 1) if x >= 1 else 1


# -- the search, on measurements given as functions --


@dataclass
class MemoryFit:
    """``bytes(num_envs) = fixed_bytes + bytes_per_env * num_envs``, fitted to probes."""

    fixed_bytes: float
    bytes_per_env: float
    probes: list[tuple[int, int]]
    """``(num_envs, peak bytes)`` measured"""

    def bytes_at(self, num_envs: int) -> float:
        return self.fixed_bytes + self.bytes_per_env * num_envs


def fit_memory(probes: list[tuple[int, int]]) -> MemoryFit:
    """The least-squares line through ``probes`` ``[(num_envs, bytes), ...]``. One size
    only: a line through the origin (all bytes per env: an overestimate). The slope is
    never below 0, nor the fixed part below 0."""
    sizes = {n for n, _ in probes}
    if len(sizes) < 2:
        n = max(n for n, _ in probes)
        peak = max(b for _, b in probes)
        return MemoryFit(0.0, peak / n, list(probes))
    k = len(probes)
    mean_n = sum(n for n, _ in probes) / k
    mean_b = sum(b for _, b in probes) / k
    slope = (sum((n - mean_n) * (b - mean_b) for n, b in probes)
             / sum((n - mean_n) ** 2 for n, _ in probes))
    slope = max(slope, 0.0)
    return MemoryFit(max(mean_b - slope * mean_n, 0.0), slope, list(probes))


def largest_fitting(fit: MemoryFit, budget: float, cap: int) -> int:
    """The largest power of two ``<= cap`` whose predicted bytes fit ``budget`` (1 if
    none does: the verification then says whether 1 fits)."""
    n = power_of_two_floor(cap)
    while n > 1 and fit.bytes_at(n) > budget:
        n //= 2
    return n


@dataclass
class MemorySearch:
    """What :func:`search_memory` found."""

    num_envs: int
    fit: MemoryFit
    peak: int
    """measured peak bytes at ``num_envs``"""
    failed: list[int] = field(default_factory=list)
    """sizes that ran out of memory when verified (each halved)"""


def search_memory(measure: Callable[[int], int], budget: float, cap: int,
                  probe_sizes: tuple[int, int]) -> MemorySearch:
    """The largest power of two ``<= cap`` that fits ``budget`` bytes: fitted to two
    probes, then verified.

    Args:
        measure: builds and runs ``num_envs``, returns its peak bytes; raises
            :class:`OutOfMemory` (or a real out-of-memory error) if it does not fit.
        budget: bytes the run may use.
        cap: the most envs.
        probe_sizes: the two sizes to fit the line to (halved together while one runs
            out of memory).

    Raises:
        OutOfMemory: not even one env fits.
    """
    small, large = probe_sizes
    while True:
        try:
            probes = [(n, measure(n)) for n in sorted({small, large})]
            break
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            if large == 1:
                raise _no_room(exc) from exc
            small, large = max(1, small // 2), max(1, large // 2)
    fit = fit_memory(probes)
    n = largest_fitting(fit, budget, cap)
    measured = dict(probes)
    failed = []
    while n not in measured:  # a probe's size needs no second run
        try:
            measured[n] = measure(n)
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            if n == 1:
                raise _no_room(exc) from exc
            failed.append(n)
            n //= 2
    return MemorySearch(n, fit, measured[n], failed)


def _no_room(exc: BaseException) -> OutOfMemory:
    return OutOfMemory(f"num_envs: auto: not even 1 env fits in memory "
                       f"({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__})")


@dataclass
class ThroughputSearch:
    """What :func:`search_throughput` measured and chose."""

    num_envs: int
    rates: list[tuple[int, float | None]]
    """``(num_envs, env-steps/s)`` in the order measured; ``None``: out of memory"""


def search_throughput(rate: Callable[[int], float], start: int, cap: int,
                      min_gain: float = MIN_GAIN) -> ThroughputSearch:
    """Double from ``start`` (a power of two) up to ``cap`` while each doubling raises
    ``rate(num_envs)`` (env-steps/s) by at least ``min_gain``; the last size that did
    (or ``cap``). Out of memory at a size stops there too."""
    n = min(power_of_two_floor(start), power_of_two_floor(cap))
    rates: list[tuple[int, float | None]] = [(n, rate(n))]
    while 2 * n <= cap:
        try:
            doubled = rate(2 * n)
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            rates.append((2 * n, None))
            break
        rates.append((2 * n, doubled))
        if doubled - rates[-2][1] < min_gain * rates[-2][1]:
            break
        n *= 2
    return ThroughputSearch(n, rates)


# -- the real measurements --


@dataclass
class Choice:
    """What :func:`choose_num_envs` chose, and the lines that say why."""

    num_envs: int
    slots_per_env: int
    lines: list[str]


def choose_num_envs(config: Config, device: torch.device,
                    trainer_class: Callable[[Config], Any],
                    log: Callable[[str], None] | None = print) -> Choice:
    """The ``num_envs`` for ``config`` on ``device`` (``trainer.autoscale``,
    ``autoscale_memory_fraction``, ``autoscale_max_envs``), printed through ``log``.

    Builds trainers of ``config`` (``trainer_class(config)``, see :class:`Probe`) at
    several sizes (in a temporary run directory) and frees them again; the caller builds
    the real one afterwards.
    """
    t = config.trainer
    probe = Probe(config, device, trainer_class)
    try:
        meter = MemoryMeter(device)
        lines: list[str] = []
        per_env = _slots_per_env(config, device)  # the probe sizes are in slots
        cap = t.autoscale_max_envs
        why_cap = f"autoscale_max_envs {cap:,}"
        if device.type == "cpu" and (CPU_MAX_SLOTS - 1) // per_env < cap:
            cap = max(1, (CPU_MAX_SLOTS - 1) // per_env)
            why_cap = f"the CPU limit (fewer than {CPU_MAX_SLOTS:,} vector slots)"
        if t.algo in ("ppo", "a2c"):
            rows = per_env * config.algo_config.num_steps
            if MAX_ROLLOUT_ROWS // rows < cap:
                cap = max(1, MAX_ROLLOUT_ROWS // rows)
                why_cap = f"{MAX_ROLLOUT_ROWS + 1:,} roll-out rows (32-bit row indices)"
        ddpg_rows = _ddpg_buffer_rows(config)
        if ddpg_rows is not None and ddpg_rows // per_env < cap:
            cap = max(1, ddpg_rows // per_env)
            why_cap = f"ddpg.buffer_size {ddpg_rows:,} (one step of every slot)"
        cap = power_of_two_floor(cap)
        if log is not None:  # the search takes seconds to minutes: say what is going on
            log(f"num_envs: auto: building and timing the trainer at a few sizes on "
                f"{device} (trainer.autoscale: {t.autoscale}) ...")
        if memory_is_measurable(device):
            probe_slots = PROBE_SLOTS["cpu" if device.type == "cpu" else "cuda"]
            large = min(cap, power_of_two_floor(probe_slots[1] // per_env))
            small = max(1, min(large // 4, power_of_two_floor(probe_slots[0] // per_env)))
            _warm_up(probe, small)
            probe.free_memory()
            free = meter.free()  # after the warm-up: kernels and library handles loaded
            budget = t.autoscale_memory_fraction * free
            found = search_memory(probe.peak_bytes, budget, cap, (small, large))
            n = found.num_envs
            memory_text = _memory_text(found, n, cap, why_cap, budget, free,
                                       t.autoscale_memory_fraction, device)
        else:
            n = cap
            memory_text = f"{why_cap}; memory not measurable on this host"
            probe.run(n)  # the choice is built and run once all the same
        if t.autoscale == "throughput":
            start = power_of_two_floor(min(THROUGHPUT_START_SLOTS // per_env, n // 4))
            table = _RateTable(per_env, log)
            searched = search_throughput(table.measuring(probe.rate), start, n)
            lines += table.lines
            limit = n
            n = searched.num_envs
            memory_text += "; " + _throughput_text(searched, limit)
        slots = f", {n * per_env:,} vector slots" if per_env > 1 else ""
        unit = " (games)" if per_env > 1 else ""
        lines.append(f"num_envs{unit}: auto -> {n:,}{slots} ({memory_text})")
        if log is not None:
            log(lines[-1])
        return Choice(n, per_env, lines)
    finally:
        probe.close()


def _slots_per_env(config: Config, device: torch.device) -> int:
    """Vector slots of one env (agents per game of a multi-agent env, else 1)."""
    from gpu_vecenv.train.training_env import make_env

    env = make_env(config, device, num_envs=1)
    try:
        return int(env.num_envs)
    finally:
        close = getattr(env, "close", None)
        if close is not None:
            close()


def _warm_up(probe: Probe, num_envs: int) -> None:
    """One run whose measure is dropped: what happens once per process (imports, kernel
    compilation, cuBLAS workspaces, the capture stream's) is then in use before the
    measured probes and does not bend the fitted line."""
    try:
        probe.peak_bytes(num_envs)
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise


def _ddpg_buffer_rows(config: Config) -> int | None:
    if config.trainer.algo != "ddpg":
        return None
    return min(config.policy_config(name).buffer_size
               for name in (list(config.policies) or ["default"]))


def _bytes(x: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if x >= size:
            return f"{x / size:.2f} {unit}"
    return f"{x:.0f} B"


def _memory_text(found: MemorySearch, n: int, cap: int, why_cap: str, budget: float,
                 free: int, fraction: float, device: torch.device) -> str:
    fit = found.fit
    sizes = " and ".join(f"{size:,}" for size, _ in fit.probes)
    where = "free" if device.type == "cuda" else "available RAM"
    used = (f"{_bytes(found.peak)} (measured)" if n in dict(fit.probes) else
            f"{_bytes(fit.bytes_at(n))} predicted, {_bytes(found.peak)} measured")
    text = (f"memory: {_bytes(fit.bytes_per_env)} per env + {_bytes(fit.fixed_bytes)}, "
            f"measured at {sizes} envs; {n:,} envs use {used}, of "
            f"{fraction:g} x {_bytes(free)} {where}")
    if n == cap and fit.bytes_at(2 * n) <= budget:
        text += f", capped by {why_cap}"
    if found.failed:
        text += (", out of memory at " + ", ".join(f"{s:,}" for s in found.failed)
                 + " (halved)")
    return text


class _RateTable:
    """The throughput table, each row logged as it is measured (a search on a GPU takes
    a minute or two)."""

    def __init__(self, per_env: int, log: Callable[[str], None] | None):
        self.per_env, self.log = per_env, log
        self.lines: list[str] = []
        self.previous: float | None = None
        self._add("num_envs: auto, throughput (training env-steps/s per size):")
        self._add(f"  {'num_envs':>10}  {'slots':>12}  {'env-steps/s':>14}  gain")

    def _add(self, line: str) -> None:
        self.lines.append(line.rstrip())
        if self.log is not None:
            self.log(line.rstrip())

    def measuring(self, rate: Callable[[int], float]) -> Callable[[int], float]:
        """``rate`` that also adds its row (an out of memory too, then re-raised)."""
        def measured(n: int) -> float:
            size = f"  {n:>10,}  {n * self.per_env:>12,}"
            try:
                value = rate(n)
            except Exception as exc:
                if is_out_of_memory(exc):
                    self._add(f"{size}  {'out of memory':>14}")
                raise
            gain = f"{value / self.previous - 1:+.0%}" if self.previous else ""
            self._add(f"{size}  {value:>14,.0f}  {gain}")
            self.previous = value
            return value
        return measured


def _throughput_text(searched: ThroughputSearch, limit: int) -> str:
    n, rates = searched.num_envs, dict(searched.rates)
    if len(rates) == 1:
        return f"throughput: {rates[n]:,.0f} env-steps/s at {n:,}, the only size to measure"
    if n == limit:
        return (f"throughput: {rates[n]:,.0f} env-steps/s at {n:,}, still growing at the "
                "largest size allowed")
    doubled = rates.get(2 * n)
    if doubled is None:
        return (f"throughput: {rates[n]:,.0f} env-steps/s at {n:,}; {2 * n:,} ran out of "
                "memory")
    return (f"throughput: {rates[n]:,.0f} env-steps/s at {n:,}; doubling to {2 * n:,} gave "
            f"{doubled / rates[n] - 1:+.0%} (< {MIN_GAIN:.0%})")


def resolve_num_envs(config: Config, device: torch.device,
                     trainer_class: Callable[[Config], Any], resume_dir: Path | None = None,
                     log: Callable[[str], None] | None = print,
                     agree: Callable[[int], int] | None = None) -> Config:
    """``config`` with ``trainer.num_envs: auto`` replaced by a number: the one the run
    in ``resume_dir`` was started with (its ``config.yaml``), else
    :func:`choose_num_envs`'s for ``device`` (measuring ``trainer_class``'s trainers). A
    config with a number is returned as it is.

    ``agree``: with several data-parallel ranks, each searches on its own GPU and this
    turns the rank's choice into the one every rank uses (e.g. their minimum, through
    ``torch.distributed.all_reduce``); ``None``: the rank's own choice."""
    t = config.trainer
    if t.num_envs != "auto":
        return config
    if resume_dir is not None:
        from gpu_vecenv.train.config_loading import load_yaml

        n = (load_yaml(Path(resume_dir) / "config.yaml").get("trainer") or {}).get("num_envs")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"num_envs: auto on --resume: {resume_dir}/config.yaml holds "
                             f"no number of envs (num_envs: {n!r})")
        if log is not None:
            log(f"num_envs: auto -> {n:,} (the size the run in {resume_dir} started with)")
    else:
        n = choose_num_envs(config, device, trainer_class, log).num_envs
        if agree is not None:
            chosen, n = n, int(agree(n))
            if n != chosen and log is not None:
                log(f"num_envs: auto -> {n:,} agreed between the ranks (this one chose "
                    f"{chosen:,})")
    return dataclasses.replace(config, trainer=dataclasses.replace(t, num_envs=n))
