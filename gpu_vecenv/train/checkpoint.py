"""Checkpoints: written atomically, loadable with ``torch.load(weights_only=True)``.

A checkpoint is a dict of plain tensors, dicts, lists and numbers:
``format``, ``version``, ``config`` (the resolved config as a dict), ``counters``
(``iteration``, ``global_step``), ``policies`` (per policy: model and optimizer state
dicts, DDPG's replay buffer and noise state), ``rng`` (the sampling generator and
torch's global RNG), ``env`` (the env's full state and current observations),
``episode_stats`` and ``return_windows`` (per policy, the ``[sum of returns, episodes]``
rows that ``trainer.stop_at_return`` is measured over; absent in older checkpoints).

A data-parallel run (:mod:`gpu_vecenv.train.distributed`) adds ``world_size`` and
``rank``: rank 0's checkpoint is ``latest.pt``, rank ``r``'s ``latest.rank<r>.pt``
beside it (:func:`rank_file`), each with that rank's env state, RNG, episode counters
(and DDPG replay); model and optimizer are the same in all. A checkpoint without
``world_size`` is a single-process run's (world size 1).

Loading refuses, naming the file, what no run writes: an empty or torn file, counters
that are not counts (``global_step`` negative, not an int, not a whole number of
iterations), NaN or infinite weights, optimizer state or env state (a run whose training
diverged stops before saving; :mod:`gpu_vecenv.train.divergence`). Temporary files left
by a save that was killed are removed by the next save of the same file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

FORMAT = "gpu_vecenv.train.checkpoint"
VERSION = 1


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, corrupt, or does not match the run."""


def save_checkpoint(payload: dict[str, Any], path: str | Path) -> None:
    """Write ``payload`` to ``path`` atomically: a temporary file in the same folder,
    flushed to disk, then ``os.replace`` (a crash leaves the old file intact)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_files(path.parent, path.name)
    payload = {"format": FORMAT, "version": VERSION, **payload}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def keep_copy(path: str | Path, kept: str | Path) -> None:
    """Keep checkpoint ``path`` as it is now under the name ``kept`` too: a hard link
    (:func:`save_checkpoint` replaces ``path`` by a new file, so the link keeps this one),
    or a copy where the file system has no links; atomic like :func:`save_checkpoint`."""
    path, kept = Path(path), Path(kept)
    tmp = kept.with_name(f".{kept.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        try:
            os.link(path, tmp)
        except OSError:
            shutil.copyfile(path, tmp)
        os.replace(tmp, kept)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_stale_temp_files(folder: Path, name: str = "*.pt") -> list[Path]:
    """Delete the temporary files that a killed :func:`save_checkpoint` of ``name`` (a
    file name or a glob) left in ``folder``; returns them. Only while nothing saves there:
    at the next save of the same file, or before a run resumes."""
    stale = sorted(folder.glob(f".{name}.*.tmp"))
    for tmp in stale:
        tmp.unlink(missing_ok=True)
    return stale


def first_line(exc: BaseException, limit: int = 200) -> str:
    """``TypeName: first line of the message`` (an empty message included)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:limit]}" if lines else type(exc).__name__


def load_checkpoint(path: str | Path, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Load and sanity-check a checkpoint (``weights_only=True``: no code runs)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    if path.stat().st_size == 0:
        raise CheckpointError(f"checkpoint {path} is empty (0 bytes)")
    try:
        payload = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"checkpoint {path} is corrupt or unreadable "
                              f"({first_line(exc)})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a gpu_vecenv training checkpoint")
    if payload.get("version") != VERSION:
        raise CheckpointError(f"{path} has checkpoint version {payload.get('version')}; "
                              f"this gpu_vecenv reads version {VERSION}")
    missing = [k for k in ("config", "counters", "policies") if k not in payload]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {missing}")
    _check_counters(payload["counters"], path)
    for where in ("policies", "env"):
        for name, tensor in _float_tensors(payload.get(where), where):
            if not bool(tensor.isfinite().all()):
                raise CheckpointError(f"checkpoint {path} holds NaN or infinite values in "
                                      f"{name}: no run saves these; it cannot be used")
    return payload


def _check_counters(counters: Any, path: Path) -> None:
    """``counters`` must hold ``iteration`` and ``global_step``: ints >= 0, the steps a
    whole number of iterations (every iteration adds the same batch)."""
    if not isinstance(counters, dict):
        raise CheckpointError(f"checkpoint {path}: counters must be a mapping, got "
                              f"{type(counters).__name__}")
    for key in ("iteration", "global_step"):
        value = counters.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CheckpointError(f"checkpoint {path} holds an impossible counters.{key} "
                                  f"{value!r} (a count: an int >= 0)")
    iteration, step = counters["iteration"], counters["global_step"]
    if (iteration == 0) != (step == 0) or (iteration and step % iteration):
        raise CheckpointError(f"checkpoint {path} holds impossible counters: global_step "
                              f"{step} is not a whole number of iterations ({iteration})")


def check_batch(counters: dict[str, int], batch: int, path: Path) -> None:
    """The counters of a checkpoint a run resumes from must be whole iterations of its
    batch (``batch`` env steps each)."""
    if counters["global_step"] != counters["iteration"] * batch:
        raise CheckpointError(
            f"checkpoint {path} holds impossible counters: global_step "
            f"{counters['global_step']} after {counters['iteration']} iterations of "
            f"{batch} steps (this run's batch)")


def fitted(saved: Any, current: torch.Tensor, name: str) -> torch.Tensor:
    """``saved`` on ``current``'s device if it has ``current``'s shape and dtype, else a
    ``ValueError`` naming ``name``."""
    if not isinstance(saved, torch.Tensor):
        raise ValueError(f"{name} must be a tensor, got {type(saved).__name__}")
    if saved.shape != current.shape or saved.dtype != current.dtype:
        raise ValueError(f"{name} has shape {tuple(saved.shape)} and dtype {saved.dtype}, "
                         f"expected {tuple(current.shape)} and {current.dtype}")
    return saved.to(current.device)


def _float_tensors(value: Any, where: str) -> Iterator[tuple[str, torch.Tensor]]:
    """``(dotted name, tensor)`` of every floating-point tensor in nested dicts/lists."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _float_tensors(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _float_tensors(item, f"{where}[{i}]")


def find_checkpoint(path: str | Path) -> Path:
    """``path`` itself if it is a file, else ``<run_dir>/checkpoints/latest.pt``."""
    path = Path(path)
    if path.is_dir():
        latest = path / "checkpoints" / "latest.pt"
        if not latest.is_file():
            raise FileNotFoundError(f"no checkpoint in run directory {path} "
                                    f"(expected {latest})")
        return latest
    if not path.exists():
        raise FileNotFoundError(f"{path} is neither a run directory nor a checkpoint file")
    return path


def rank_file(path: str | Path, rank: int) -> Path:
    """Where rank ``rank`` (> 0) of a data-parallel run keeps its part of checkpoint
    ``path``: ``latest.pt`` -> ``latest.rank1.pt``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.rank{rank}{path.suffix}")


def rank_payload(payload: dict[str, Any], path: str | Path, rank: int, world_size: int,
                 device: torch.device | str = "cpu") -> dict[str, Any]:
    """The checkpoint that rank ``rank`` of ``world_size`` resumes from, given rank 0's
    ``payload`` (read from ``path``): ``payload`` itself for rank 0, else the rank's own
    file. A different world size is refused: each rank's envs and RNG streams are saved
    per rank and cannot be split or merged."""
    saved = int(payload.get("world_size", 1))
    if saved != world_size:
        def launch(n: int) -> str:
            return ("a single process (no torchrun)" if n == 1 else
                    f"{n} processes (torchrun --nproc-per-node {n}, or --gpus {n})")
        raise CheckpointError(
            f"checkpoint {path} was written by a run on {launch(saved)}; this run has "
            f"{world_size}. Resume on the same number of processes: every rank's envs, "
            "random streams and episode counters are saved per rank, and a run cannot "
            "move to another number of GPUs mid-way")
    if rank == 0:
        return payload
    own_path = rank_file(path, rank)
    own = load_checkpoint(own_path, device)
    if own.get("rank") != rank or own.get("counters") != payload["counters"]:
        raise CheckpointError(
            f"{own_path} (rank {own.get('rank')}, counters {own.get('counters')}) does not "
            f"belong with {path} (counters {payload['counters']}): the run stopped while "
            "writing a checkpoint; no consistent checkpoint to resume from")
    return own
