"""Gymnasium registration and the ``make_vec`` / ``make`` entry points of every id.

``register_envs()`` is what the ``gymnasium.envs`` entry point and the start-up hook
call; it only registers strings, so it costs nothing until an env is made. Gymnasium
resolves ``"gpu_vecenv.registration:vector_GPUCartPole_v1"`` through this module's
``__getattr__`` into a maker bound to that id.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from gpu_vecenv.registry import ENVS, get_entry, load_module


def _attr(env_id: str) -> str:
    return env_id.replace("-", "_")


def register_envs() -> None:
    """Register every id with Gymnasium (ids already present are left alone)."""
    from gymnasium.envs.registration import register, registry

    for entry in ENVS.values():
        if entry.id in registry:
            continue
        register(
            id=entry.id,
            entry_point=f"gpu_vecenv.registration:single_{_attr(entry.id)}",
            vector_entry_point=f"gpu_vecenv.registration:vector_{_attr(entry.id)}",
            max_episode_steps=entry.max_episode_steps,
            reward_threshold=entry.reward_threshold,
        )


def make_vec(env_id: str, num_envs: int = 1, **kwargs: Any):
    """Make the vector env of ``env_id`` (what ``gymnasium.make_vec`` calls)."""
    module = load_module(env_id)
    vector_cls = getattr(module, "VECTOR_ENV", None)
    if vector_cls is not None:
        env = vector_cls(num_envs=num_envs, **kwargs)
    else:
        from gpu_vecenv.vector_env import GpuVectorEnv

        env = GpuVectorEnv(module.DEFINITION, num_envs, **kwargs)
    env.env_id = env_id
    return env


def make_single(env_id: str, **kwargs: Any):
    """A one-env ``gymnasium.Env`` view of ``env_id`` (what ``gymnasium.make`` calls)."""
    get_entry(env_id)
    from gpu_vecenv.single_env import SingleEnvView

    return SingleEnvView(env_id, **kwargs)


def __getattr__(name: str):
    for prefix, maker in (("vector_", make_vec), ("single_", make_single)):
        if name.startswith(prefix):
            wanted = name[len(prefix):]
            for env_id in ENVS:
                if _attr(env_id) == wanted:
                    return partial(maker, env_id)
    raise AttributeError(f"module 'gpu_vecenv.registration' has no attribute {name!r}")
