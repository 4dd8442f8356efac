"""The shipped YAML configs (``gpu_vecenv/train/configs/``), one or more per env.

A shipped config is named by its file name without ``.yaml`` (``cartpole_ppo``); the
CLI (``gpu-vecenv train cartpole_ppo``) and :func:`~gpu_vecenv.train.load_config` accept
that name wherever they accept a path. ``gpu-vecenv configs`` lists them.
"""

from __future__ import annotations

import difflib
from pathlib import Path

CONFIG_DIR = Path(__file__).parent / "configs"

# env id -> algorithm -> file; the first algorithm listed is the env's default.
PRESETS: dict[str, dict[str, str]] = {
    "GPUCartPole-v1": {"ppo": "cartpole_ppo.yaml", "a2c": "cartpole_a2c.yaml"},
    "GPUAcrobot-v1": {"ppo": "acrobot_ppo.yaml"},
    "GPUMountainCar-v0": {"ppo": "mountain_car_ppo.yaml"},
    "GPUMountainCarContinuous-v0": {"ddpg": "mountain_car_continuous_ddpg.yaml"},
    "GPUPendulum-v1": {"ddpg": "pendulum_ddpg.yaml"},
    "GPUTag-v0": {"ppo": "tag_ppo.yaml"},
    "GPUTagGrid-v0": {"ppo": "tag_grid_ppo.yaml"},
}


def default_config_path(env_id: str, algo: str | None = None) -> Path | None:
    """The shipped config of ``env_id`` (for ``algo``, or the env's default algorithm);
    ``None`` if there is none."""
    by_algo = PRESETS.get(env_id)
    if not by_algo:
        return None
    name = by_algo.get(algo) if algo else next(iter(by_algo.values()))
    return CONFIG_DIR / name if name else None


def list_presets() -> list[Path]:
    """Every shipped config file."""
    return sorted(CONFIG_DIR.glob("*.yaml"))


def preset_names() -> list[str]:
    """The names of the shipped configs (``cartpole_ppo``, ...), sorted."""
    return [path.stem for path in list_presets()]


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
    names = preset_names()
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise FileNotFoundError(
        f"config file {name_or_path} does not exist and is not a shipped "
        f"config{hint}; shipped configs: {', '.join(names)} "
        "(gpu-vecenv configs describes them)"
    )


def describe_presets() -> list[dict[str, object]]:
    """One row per shipped config: name, env, algo, num_envs, total_steps,
    stop_at_return, whether it is its env's default, and the first comment line."""
    from gpu_vecenv.train.config_loading import load_config

    rows = []
    for path in list_presets():
        config = load_config(path)
        t = config.trainer
        first = path.read_text().splitlines()[0] if path.stat().st_size else ""
        rows.append(
            {
                "name": path.stem,
                "env": t.env,
                "algo": t.algo,
                "num_envs": t.num_envs,
                "total_steps": t.total_steps,
                "stop_at_return": t.stop_at_return,
                "default": default_config_path(t.env) == path,
                "summary": first.lstrip("# ").strip() if first.startswith("#") else "",
            }
        )
    return rows
