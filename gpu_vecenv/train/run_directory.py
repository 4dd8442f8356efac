"""A run directory: what a run writes there, when a new run may use it, and what a
resumed run may change.

A run writes ``config.yaml``, ``metrics.jsonl``, ``tensorboard/``, ``checkpoints/`` and
``eval.json``. A new run refuses a directory that already holds a run unless told to
overwrite it; a resumed run loads ``checkpoints/latest.pt`` and must have the config that
wrote it, except for the keys in :data:`RESUMABLE_CHANGES`.
"""

from __future__ import annotations

import shutil
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
    "eval_episodes",
    "progress",
    "progress_interval",
    "tensorboard",
    "torch_threads",
    "sync_timing",
    "device",
    "cuda_graphs",
    "fused_kernels",
    "stop_at_return",
    "autoscale",
    "autoscale_memory_fraction",
    "autoscale_max_envs",
}
"""``trainer`` keys that may differ between a checkpoint's config and the resuming run's."""

RUN_OUTPUTS = ("config.yaml", "metrics.jsonl", "eval.json", "checkpoints", "tensorboard")
"""What a run writes into its directory: all that :func:`clear_outputs` deletes."""


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
