"""The shipped YAML configs (``gpu_vecenv/train/configs/``), one or more per env."""

from __future__ import annotations

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
