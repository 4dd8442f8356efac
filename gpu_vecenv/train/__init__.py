"""The native trainer: PPO, A2C and DDPG on GPU vector envs, data kept on the device.

Train in a few lines::

    from gpu_vecenv.train import PPOConfig, train

    result = train("GPUCartPole-v1", PPOConfig(num_steps=16), num_envs=64,
                   total_steps=200_000, seed=1)
    print(result.evaluation["mean_return"], result.run_dir)

or from a YAML file (``load_config("cartpole_ppo.yaml", ["ppo.learning_rate=1e-3"])``),
or on the command line: ``gpu-vecenv train --env GPUCartPole-v1``. See docs/training.md.
"""

from __future__ import annotations

from gpu_vecenv.train.config import A2CConfig, Config, DDPGConfig, PPOConfig, TrainerConfig
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.evaluate import evaluate, load_models
from gpu_vecenv.train.presets import default_config_path
from gpu_vecenv.train.trainer import Trainer, TrainResult, train

__all__ = [
    "A2CConfig",
    "Config",
    "DDPGConfig",
    "PPOConfig",
    "TrainResult",
    "Trainer",
    "TrainerConfig",
    "default_config_path",
    "evaluate",
    "load_config",
    "load_models",
    "train",
]
