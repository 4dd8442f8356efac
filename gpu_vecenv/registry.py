"""The one table of env ids. Pure data: importing it loads neither torch nor gymnasium.

Adding an env: one line here, one ``envs/<name>.py`` exporting ``DEFINITION`` (or, for
a multi-agent env, its own vector class), one ``cuda_src/<name>.cu``, and their tests.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvEntry:
    """One registered env id."""

    id: str
    module: str
    """Module holding the env: it exports ``DEFINITION`` (single-agent) or ``VECTOR_ENV``."""
    max_episode_steps: int | None
    reward_threshold: float | None = None
    summary: str = ""


ENVS: dict[str, EnvEntry] = {
    e.id: e
    for e in (
        EnvEntry("GPUCartPole-v1", "gpu_vecenv.envs.cartpole", 500, 475.0,
                 "Gymnasium CartPole-v1: balance a pole on a cart"),
        EnvEntry("GPUAcrobot-v1", "gpu_vecenv.envs.acrobot", 500, -100.0,
                 "Gymnasium Acrobot-v1: swing a two-link arm up"),
        EnvEntry("GPUMountainCar-v0", "gpu_vecenv.envs.mountain_car", 200, -110.0,
                 "Gymnasium MountainCar-v0: drive up a hill, discrete push"),
        EnvEntry("GPUMountainCarContinuous-v0", "gpu_vecenv.envs.mountain_car_continuous",
                 999, 90.0, "Gymnasium MountainCarContinuous-v0: continuous force"),
        EnvEntry("GPUPendulum-v1", "gpu_vecenv.envs.pendulum", 200, None,
                 "Gymnasium Pendulum-v1: swing up and hold a pendulum"),
        EnvEntry("GPUTag-v0", "gpu_vecenv.envs.tag", None, None, "continuous multi-agent Tag"),
        EnvEntry("GPUTagGrid-v0", "gpu_vecenv.envs.tag_grid", None, None, "gridworld Tag"),
    )
}


class UnknownEnvError(KeyError):
    """An env id that is not registered."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


def get_entry(env_id: str) -> EnvEntry:
    """The entry of ``env_id``, or :class:`UnknownEnvError` naming close matches."""
    if not isinstance(env_id, str):
        raise TypeError(f"env id must be a str, got {type(env_id).__name__}")
    try:
        return ENVS[env_id]
    except KeyError:
        close = difflib.get_close_matches(env_id, list(ENVS), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UnknownEnvError(
            f"unknown env id {env_id!r}.{hint} Registered: {', '.join(ENVS)}"
        ) from None


def load_module(env_id: str):
    """Import and return the module of ``env_id``."""
    return importlib.import_module(get_entry(env_id).module)


def list_ids() -> list[str]:
    """All registered ids, in table order."""
    return list(ENVS)
