"""The native trainer: PPO, A2C and DDPG on GPU vector envs, data kept on the device.

Train in a few lines::

    from gpu_vecenv.train import PPOConfig, train

    result = train("GPUCartPole-v1", PPOConfig(learning_rate=2.5e-4), num_envs=16,
                   total_steps=500_000, seed=1)
    print(result.evaluation["mean_return"], result.run_dir)

or from a YAML file or shipped config (``load_config("cartpole_ppo",
["ppo.learning_rate=1e-3"])``), or on the command line: ``gpu-vecenv train --env
GPUCartPole-v1``. Use a trained run: ``load_policy(run_dir).predict(obs)`` (SB3's
``predict``). See docs/training.md.
"""

from __future__ import annotations

import importlib

# Loaded on first use, so that `gpu-vecenv --help` and config parsing do not import torch.
_EXPORTS = {
    "A2CConfig": "gpu_vecenv.train.config",
    "Config": "gpu_vecenv.train.config",
    "DDPGConfig": "gpu_vecenv.train.config",
    "PPOConfig": "gpu_vecenv.train.config",
    "TrainerConfig": "gpu_vecenv.train.config",
    "load_config": "gpu_vecenv.train.config_loading",
    "evaluate": "gpu_vecenv.train.evaluation",
    "load_models": "gpu_vecenv.train.evaluation",
    "load_policy": "gpu_vecenv.train.trained_policy",
    "TrainedPolicy": "gpu_vecenv.train.trained_policy",
    "default_config_path": "gpu_vecenv.train.shipped_configs",
    "TrainingInterrupted": "gpu_vecenv.train.stopping",
    "TrainingDiverged": "gpu_vecenv.train.divergence",
    "TrainResult": "gpu_vecenv.train.trainer",
    "Trainer": "gpu_vecenv.train.trainer",
    "train": "gpu_vecenv.train.train_function",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gpu_vecenv.train' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
