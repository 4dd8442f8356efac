"""gpu_vecenv: GPU vector environments for Gymnasium and PettingZoo.

Importing this package is cheap: torch, gymnasium and everything optional load only
when used. The public API::

    gpu_vecenv.make_vec("GPUCartPole-v1", num_envs=4096, device="cuda")
    gpu_vecenv.list_envs()
    gpu_vecenv.register("MyEnv-v0", MY_DEFINITION)    # then make it, train it, by id
    gpu_vecenv.capture_rollout(env, policy, num_steps=128)  # T steps as one CUDA graph

and, after ``pip install``, plain ``gymnasium.make_vec("GPUCartPole-v1", num_envs=4096)``.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = [
    "CapturedRollout", "GpuVectorEnv", "InvalidActionError", "Trajectory", "capture_rollout",
    "list_envs", "make_vec", "parallel_env", "register", "__version__",
]


def make_vec(env_id: str, num_envs: int = 1, **kwargs: Any):
    """Make a vector env by id; see :class:`gpu_vecenv.vector_env.GpuVectorEnv` for kwargs."""
    from gpu_vecenv.entry_points import make_vec as _make_vec

    return _make_vec(env_id, num_envs, **kwargs)


def list_envs() -> list[str]:
    """The registered env ids."""
    from gpu_vecenv.env_ids import list_ids

    return list_ids()


def capture_rollout(env: Any, policy: Any, num_steps: int, **kwargs: Any):
    """``num_steps`` steps of ``env`` and a torch ``policy`` per call, replayed as one CUDA
    graph after a short eager warm-up, filling a preallocated trajectory with the eager
    loop's results; see :mod:`gpu_vecenv.captured_rollout` and docs/capture.md."""
    from gpu_vecenv.captured_rollout import capture_rollout as _capture_rollout

    return _capture_rollout(env, policy, num_steps, **kwargs)


def __getattr__(name: str):
    if name == "register":  # gymnasium is imported only when this is used
        from gpu_vecenv.register_env import register

        return register
    if name == "GpuVectorEnv":
        from gpu_vecenv.vector_env import GpuVectorEnv

        return GpuVectorEnv
    if name == "InvalidActionError":
        from gpu_vecenv.actions import InvalidActionError

        return InvalidActionError
    if name == "CapturedRollout":
        from gpu_vecenv.captured_rollout import CapturedRollout

        return CapturedRollout
    if name == "Trajectory":
        from gpu_vecenv.trajectory import Trajectory

        return Trajectory
    raise AttributeError(f"module 'gpu_vecenv' has no attribute {name!r}")


def parallel_env(env_id: str, num_games: int = 1, **kwargs: Any):
    """``num_games`` games of a multi-agent env (``"GPUTag-v0"``, ``"GPUTagGrid-v0"`` or an id
    registered with :func:`register`) as one batched PettingZoo ``ParallelEnv`` of tensors
    ``[num_games, ...]`` on the device; see :mod:`gpu_vecenv.multi_agent.parallel`. Needs
    pettingzoo (``pip install 'gpu-vecenv[pettingzoo]'``)."""
    from gpu_vecenv.multi_agent.parallel import parallel_env as _parallel_env

    return _parallel_env(env_id, num_games, **kwargs)
