"""The shipped training configs (``gpu_vecenv/train/configs/<name>.yaml``) and their names.

Which configs train an env is said by its entry in the env table
(:attr:`gpu_vecenv.env_ids.EnvEntry.train_configs`); the first of an algorithm is the
env's config for it, the very first the env's default. A shipped config is named by its
file name without ``.yaml`` (``cartpole_ppo``): the CLI (``gpu-vecenv train
cartpole_ppo``) and :func:`~gpu_vecenv.train.load_config` accept that name wherever they
accept a path, and ``gpu-vecenv configs`` lists them.

(Not an env's params *preset*, such as ``TagParams.warpdrive_training``: a shipped config
is a whole training run, env, algorithm and settings.)
"""

from __future__ import annotations

import difflib
from pathlib import Path

from gpu_vecenv.env_ids import ENVS

CONFIG_DIR = Path(__file__).parent / "configs"


CPU_SIZED: dict[str, str] = {
    "tag_cpu": "after about 7.5 minutes of training on 2 CPU cores its taggers tag 48 % "
               "more random runners than random taggers do, and random taggers tag its "
               "runners 34 % less often than random ones (docs/training.md, tag_cpu)",
}
"""The shipped configs sized for a CPU, each with what it reaches there and how long it
took, as measured (the CPU warning of a GPU-sized config of the same env names it)."""

GPU_SIZED_ON_CPU: dict[str, str] = {
    "GPUTag-v0": "the speed-ratio configs (tag_same_speed and its two siblings: 2,000 games "
                 "x 22 agents) had both teams beat random play by 282M agent-steps (the "
                 "first checkpoint evaluated, 30 s on an H200); on 2 CPU cores they train "
                 "7,600-11,600 agent-steps/s, so 7-10 hours (docs/training.md)",
}
"""Per env: how long its GPU-sized configs take on a CPU before they learn, as measured
(the CPU warning of such a config says it instead of a plain "expect hours")."""


def cpu_config_for(env_id: str) -> tuple[str, str] | None:
    """``(name, what it reaches on a CPU)`` of ``env_id``'s shipped CPU-sized config, if
    it has one (:data:`CPU_SIZED`)."""
    entry = ENVS.get(env_id)
    for name in entry.train_configs if entry is not None else ():
        if name in CPU_SIZED:
            return name, CPU_SIZED[name]
    return None


def shipped_config_names() -> list[str]:
    """The names of the shipped configs (``cartpole_ppo``, ...), sorted: those the env
    table names."""
    return sorted({name for entry in ENVS.values() for name in entry.train_configs})


def shipped_config_paths() -> list[Path]:
    """Every shipped config file, sorted by name."""
    return [CONFIG_DIR / f"{name}.yaml" for name in shipped_config_names()]


def default_config_path(env_id: str, algo: str | None = None) -> Path | None:
    """The shipped config of ``env_id`` for ``algo`` (its first config of that
    algorithm), or the env's default (its first config) without ``algo``; ``None`` if it
    has none (an env registered at run time or not at all, or no config of ``algo``)."""
    entry = ENVS.get(env_id)
    names = entry.train_configs if entry is not None else ()
    if algo is not None:
        names = tuple(n for n in names if _algo_of(CONFIG_DIR / f"{n}.yaml") == algo)
    return CONFIG_DIR / f"{names[0]}.yaml" if names else None


def _algo_of(path: Path) -> str | None:
    """``trainer.algo`` of a shipped config (each names it: tests/train/test_config.py),
    read without building the config."""
    import yaml

    return ((yaml.safe_load(path.read_text()) or {}).get("trainer") or {}).get("algo")


def resolve_config_path(name_or_path: str | Path) -> Path:
    """``name_or_path`` if it is a file, else the shipped config of that name (with or
    without ``.yaml``). Neither: a ``FileNotFoundError`` that lists the shipped names and
    suggests the closest one."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    name = path.name[: -len(".yaml")] if path.name.endswith(".yaml") else path.name
    shipped = CONFIG_DIR / f"{name}.yaml"
    if path.parent == Path(".") and shipped.is_file():
        return shipped
    names = shipped_config_names()
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise FileNotFoundError(
        f"config file {name_or_path} does not exist and is not a shipped "
        f"config{hint}; shipped configs: {', '.join(names)} "
        "(gpu-vecenv configs describes them)"
    )
