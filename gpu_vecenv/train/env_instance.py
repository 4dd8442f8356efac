"""Training on a vector env the caller made: ``train(envs, PPOConfig())``.

The trainer steps that env as it is; the ``TrainerConfig`` fields that describe it (its
id, size, device, backend and parameters) are read from it, so that evaluation, the saved
``config.yaml`` and ``--resume`` can make the same env again by id.
"""

from __future__ import annotations

from typing import Any

from gymnasium.vector import AutoresetMode

FIELDS_FROM_ENV = ("env", "num_envs", "device", "backend", "env_kwargs")
"""The ``TrainerConfig`` fields an env instance decides."""


def trainer_fields_of(env: Any, given: dict[str, Any]) -> dict[str, Any]:
    """The ``TrainerConfig`` fields describing ``env`` (``FIELDS_FROM_ENV``).

    Args:
        env: a ``GpuVectorEnv`` or ``MultiAgentVectorEnv`` (unwrapped) in ``SAME_STEP``
            autoreset mode, of a registered id (see :func:`gpu_vecenv.register`).
        given: the trainer fields the caller passed; none may be one of these.

    Raises:
        TypeError: a wrapped env, or ``given`` sets a field the env decides.
        ValueError: another autoreset mode, or a definition that is not registered.
    """
    from gpu_vecenv.entry_points import make_kwargs_of

    if getattr(env, "unwrapped", env) is not env:
        raise TypeError(
            f"train() takes a gpu_vecenv vector env itself, not a wrapper "
            f"({type(env).__name__}): evaluation and --resume make it again by id, "
            "without the wrapper"
        )
    mode = getattr(env, "metadata", {}).get("autoreset_mode")
    if mode != AutoresetMode.SAME_STEP:
        raise ValueError(
            f"train() needs an env made with autoreset_mode='SameStep' (the "
            f"trainer bootstraps truncated episodes from info['final_obs']), got "
            f"{mode}; e.g. gpu_vecenv.make_vec(id, n, autoreset_mode='SameStep')"
        )
    clash = sorted(set(given) & set(FIELDS_FROM_ENV))
    if clash:
        raise TypeError(
            f"train(env, ...): {', '.join(clash)} come(s) from the env; make the "
            "env with the values you want instead"
        )
    env_id, kwargs = make_kwargs_of(env)
    return {
        "env": env_id,
        "num_envs": int(getattr(env, "num_games", env.num_envs)),
        "device": str(env.device),
        "backend": env.backend_name,
        "env_kwargs": kwargs,
    }
