"""A run directory: what a run writes there, when a new run may use it, and what a
resumed run may change.

A run writes ``config.yaml``, ``metrics.jsonl``, ``tensorboard/``, ``checkpoints/`` and
``eval.json``. A new run refuses a directory that already holds a run unless told to
overwrite it; a resumed run loads ``checkpoints/latest.pt`` and must have the config that
wrote it, except for the keys in :data:`RESUMABLE_CHANGES`. Before it resumes, what a
kill can leave behind is tidied: temporary checkpoint files, and a last line of
``metrics.jsonl`` cut off mid-write (dropped, with a warning).
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

from gpu_vecenv.train import checkpoint as ckpt
from gpu_vecenv.train.config import Config
from gpu_vecenv.train.config_loading import config_from_dict
from gpu_vecenv.train.run_directory_errors import NoCheckpointYet, RunDirectoryInUse

RESUMABLE_CHANGES = {
    "total_steps",
    "run_dir",
    "log_interval",
    "checkpoint_interval",
    "keep_checkpoints",
    "eval_episodes",
    "progress",
    "progress_interval",
    "tensorboard",
    "torch_threads",
    "sync_timing",
    "matmul_precision",
    "compile_update",
    "device",
    "cuda_graphs",
    "fused_kernels",
    "stop_at_return",
    "stop_check_episodes",
    "autoscale",
    "autoscale_memory_fraction",
    "autoscale_max_envs",
}
"""``trainer`` keys that may differ between a checkpoint's config and the resuming run's."""

RUN_OUTPUTS = ("config.yaml", "metrics.jsonl", "eval.json", "checkpoints", "tensorboard")
"""What a run writes into its directory: all that :func:`clear_outputs` deletes."""


def check_usable(run_dir: Path, new_run: bool) -> None:
    """Refuse (``ValueError``) a ``run_dir`` that is a file or lies under one; for a
    ``new_run`` also one that holds a run (:func:`check_free`)."""
    for path in (run_dir, *run_dir.parents):
        if path.exists() and not path.is_dir():
            inside = "" if path == run_dir else f" ({run_dir} would be inside it)"
            raise ValueError(f"run directory {run_dir}: {path} is a file, not a directory"
                             f"{inside}; give --run-dir (trainer.run_dir) a directory, "
                             "new or a run's")
    if new_run:
        check_free(run_dir)


def check_free(run_dir: Path) -> None:
    """Refuse (:class:`RunDirectoryInUse`, a ``ValueError``) to start a new run where one
    already wrote its logs or a checkpoint, saying how to resume or overwrite it."""
    if (run_dir / "checkpoints" / "latest.pt").exists():
        raise RunDirectoryInUse(run_dir, resumable=True)
    if has_logged_rows(run_dir):
        raise RunDirectoryInUse(run_dir, resumable=False)


def has_logged_rows(run_dir: Path) -> bool:
    """Whether a run logged anything into ``run_dir``. One stopped before its first row
    (e.g. Ctrl-C twice during the first iteration) left nothing to lose, so a new run
    may take its directory as it is."""
    metrics = run_dir / "metrics.jsonl"
    return metrics.is_file() and metrics.stat().st_size > 0


def clear_outputs(run_dir: Path) -> None:
    """Delete what a run wrote into ``run_dir`` (:data:`RUN_OUTPUTS`), nothing else."""
    for name in RUN_OUTPUTS:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def checkpoint_to_resume(run_dir: Path) -> Path:
    """``run_dir/checkpoints/latest.pt``; a ``FileNotFoundError`` that says what to do if
    the run stopped before writing one (:class:`NoCheckpointYet`)."""
    try:
        return ckpt.find_checkpoint(run_dir)
    except FileNotFoundError as exc:
        if has_logged_rows(run_dir):
            raise NoCheckpointYet(str(exc)) from None
        raise


def prepare_resume(run_dir: Path, tidy: bool = True) -> Path:
    """The checkpoint to resume from (:func:`checkpoint_to_resume`); with ``tidy`` (one
    process of a data-parallel run: rank 0) first what a killed run left in ``run_dir``
    is tidied: temporary checkpoint files, a torn last line of ``metrics.jsonl``."""
    path = checkpoint_to_resume(run_dir)
    if not tidy:
        return path
    ckpt.remove_stale_temp_files(path.parent)
    dropped = drop_torn_last_row(run_dir / "metrics.jsonl")
    if dropped is not None:
        warnings.warn(f"{run_dir / 'metrics.jsonl'}: dropped its last line, cut off "
                      f"mid-write when the run stopped ({dropped!r})", stacklevel=3)
    return path


def drop_torn_last_row(metrics: Path) -> str | None:
    """Remove the last line of ``metrics`` (JSON lines) if it is not a whole JSON row
    (a write cut short by a kill) and return it; ``None`` if there is none. A bad line
    before the last is not from a kill: a ``ValueError`` naming the file and line."""
    if not metrics.is_file():
        return None
    data = metrics.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the file ends with a newline, as every whole row does
    for number, line in enumerate(lines, 1):
        try:
            json.loads(line) if line.strip() else None
        except ValueError as exc:
            if number < len(lines):
                raise ValueError(f"{metrics} line {number} is not a JSON row ({exc}); "
                                 "fix or delete that line to resume") from None
            metrics.write_bytes(b"".join(kept + b"\n" for kept in lines[:-1]))
            return line.decode("utf-8", "replace")
    if data and not data.endswith(b"\n"):  # a whole row, cut before its newline
        metrics.write_bytes(data + b"\n")
    return None


def check_compatible(saved: dict[str, Any], config: Config, path: Path) -> None:
    """Raise :class:`CheckpointError` if ``saved`` (a checkpoint's config) differs from
    ``config`` in anything but the keys a resumed run may change."""
    try:
        saved_config = config_from_dict(saved)
    except (ValueError, TypeError, KeyError) as exc:
        raise ckpt.CheckpointError(f"checkpoint {path} holds an invalid config: {exc}") from None
    ours, theirs = config.to_dict(), saved_config.to_dict()
    diffs = []
    for section in ours:
        a, b = ours[section], theirs.get(section)
        if section == "trainer":
            a = {k: v for k, v in a.items() if k not in RESUMABLE_CHANGES}
            b = {k: v for k, v in (b or {}).items() if k not in RESUMABLE_CHANGES}
        if a != b:
            keys = sorted(k for k in set(a) | set(b or {}) if a.get(k) != (b or {}).get(k))
            diffs += [
                f"{section}.{k}: checkpoint {(b or {}).get(k)!r}, now {a.get(k)!r}" for k in keys
            ]
    if diffs:
        raise ckpt.CheckpointError(
            f"checkpoint {path} was written by a different config: " + "; ".join(diffs)
        )


def record_world_size(config_path: Path, world_size: int, backend: str | None) -> None:
    """Append the launch of a data-parallel run to its saved config (a ``distributed``
    section that loading the config skips: the launch, not the config, sets it)."""
    with open(config_path, "a") as f:
        f.write("# set by the launch (torchrun), not a setting; a resume needs the same\n"
                f"distributed:\n  world_size: {world_size}\n  backend: {backend}\n")
