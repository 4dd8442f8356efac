"""``train(...)``: a whole run in one call, from a :class:`Config`, an env id with an
algorithm's config, or a vector env the caller made (:mod:`.env_instance`); it builds a
:class:`~gpu_vecenv.train.trainer.Trainer` and runs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from gymnasium.vector import VectorEnv

from gpu_vecenv.train.config import ALGO_CONFIGS, Config
from gpu_vecenv.train.config_loading import config_from_dict
from gpu_vecenv.train.trainer import Trainer, TrainResult


def train(config: Config | str | VectorEnv, algo_config: Any = None, *, resume: bool = False,
          overwrite: bool = False,
          callback: Callable[[dict[str, Any]], bool | None] | None = None,
          **trainer: Any) -> TrainResult:
    """Train and return a :class:`TrainResult`.

    ``config`` is a full :class:`Config`, or an env id, or a vector env made by gpu_vecenv
    (in ``SAME_STEP`` autoreset mode); then ``algo_config`` (a ``PPOConfig``, ``A2CConfig``
    or ``DDPGConfig``) picks the algorithm and ``trainer`` sets fields of
    :class:`TrainerConfig`::

        result = train("GPUCartPole-v1", PPOConfig(), num_envs=64, total_steps=200_000)
        envs = gpu_vecenv.make_vec("PointReach-v0", 64, autoreset_mode="SameStep")
        result = train(envs, PPOConfig(), total_steps=200_000)

    An env instance is trained on as it is; its id, size, device, backend and parameters
    fill in ``trainer`` (so evaluation and ``--resume`` can make it again by id).
    """
    env = None
    if not isinstance(config, (str, Config)):
        from gpu_vecenv.train.env_instance import trainer_fields_of

        env = config
        described = trainer_fields_of(env, trainer)
        config = described.pop("env")
        trainer = {**described, **trainer}
    if isinstance(config, str):
        raw: dict[str, Any] = {"trainer": {"env": config, **trainer}}
        if algo_config is not None:
            names = {cls: name for name, cls in ALGO_CONFIGS.items()}
            if type(algo_config) not in names:
                raise TypeError(f"algo_config must be one of {list(ALGO_CONFIGS.values())}")
            name = names[type(algo_config)]
            raw["trainer"]["algo"] = name
            # Through the dict form, so the same validation applies as for YAML files.
            raw[name] = dataclasses.asdict(algo_config)
        config = config_from_dict(raw)
    elif trainer or algo_config is not None:
        raise TypeError("pass trainer fields and algo_config only with an env id")
    with Trainer(config, resume=resume, callback=callback, env=env,
                 overwrite=overwrite) as trainer:
        return trainer.run()
