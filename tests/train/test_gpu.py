"""The trainer on a CUDA device (``-m gpu``; skipped without CUDA and PyCUDA).

Roll-out and update must not synchronize the host with the GPU:
``torch.cuda.set_sync_debug_mode("error")`` turns any synchronizing call (``.item()``,
``.cpu()``, blocking copies, ``nonzero``) into an error while they run.
"""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv.train import evaluate
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.trainer import Trainer

pytestmark = pytest.mark.gpu

COMMON = {"device": "cuda", "progress": False, "tensorboard": False, "eval_episodes": 0,
          "checkpoint_interval": 0}


@pytest.mark.parametrize(
    "overrides, trainer",
    [
        (["ppo.num_steps=16"], {"env": "GPUCartPole-v1", "num_envs": 2048}),
        (["ppo.num_steps=8", "ppo.normalize_obs=true"],
         {"env": "GPUMountainCarContinuous-v0", "num_envs": 256}),
        (["trainer.algo=a2c"], {"env": "GPUAcrobot-v1", "num_envs": 256}),
        (["trainer.algo=ddpg", "ddpg.learning_starts=0", "ddpg.batch_size=64",
          "ddpg.noise=ou", "ddpg.gradient_steps=2"], {"env": "GPUPendulum-v1", "num_envs": 64}),
        (["ppo.num_steps=8"], {"env": "GPUTag-v0", "num_envs": 16}),
    ],
    ids=["ppo-cartpole", "ppo-box", "a2c", "ddpg", "ppo-tag"],
)
def test_rollout_and_update_do_not_sync(tmp_path, overrides, trainer):
    t = Trainer(load_config(None, overrides, run_dir=str(tmp_path), **{**COMMON, **trainer}))
    t._collect()  # warm-up: lazy CUDA, cuBLAS and kernel initialisation may sync once
    t._update()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            t._collect()
            t._update()
            t.global_step += t.batch
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_ppo_solves_cartpole_on_the_gpu(tmp_path):
    config = load_config(None, ["ppo.num_steps=16", "ppo.learning_rate=0.0025"],
                         env="GPUCartPole-v1", num_envs=2048, total_steps=20_000_000, seed=1,
                         run_dir=str(tmp_path), log_interval=1, **COMMON)
    evaluations = []

    def check(row):
        if row.get("episode_return", 0.0) < 475.0:
            return True
        result = evaluate(config, trainer.groups, 100, trainer.device)
        evaluations.append(result["mean_return"])
        return result["mean_return"] < 475.0

    trainer = Trainer(config, callback=check)
    trainer.run()
    assert evaluations and evaluations[-1] >= 475.0, evaluations
