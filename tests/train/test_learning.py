"""Seeded short learning runs on the CPU: a broken algorithm fails these.

PPO must solve CartPole (mean return >= 475 over 100 evaluation episodes of the
deterministic policy) within a bounded number of env steps; A2C and DDPG must improve
clearly within a short run.
"""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv.train import A2CConfig, DDPGConfig, PPOConfig, evaluate, train
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.trainer import Trainer

COMMON = {"device": "cpu", "backend": "torch", "progress": False, "tensorboard": False,
          "checkpoint_interval": 0}


def test_ppo_solves_cartpole_within_300k_steps(tmp_path):
    """Evaluate 100 episodes whenever the training return passes 450; stop at >= 475."""
    config = load_config(None, ["ppo.num_steps=32", "ppo.learning_rate=0.001"],
                         env="GPUCartPole-v1", num_envs=64, total_steps=300_000, seed=1,
                         run_dir=str(tmp_path), eval_episodes=0, log_interval=2, **{
                             k: v for k, v in COMMON.items()})
    evaluations = []

    def check(row):
        if row.get("episode_return", 0.0) < 450.0:
            return True
        result = evaluate(config, trainer.groups, 100, torch.device("cpu"))
        evaluations.append((row["global_step"], result["mean_return"]))
        return result["mean_return"] < 475.0

    trainer = Trainer(config, callback=check)
    trainer.run()
    assert evaluations, "training return never reached 450 within 300k steps"
    step, mean_return = evaluations[-1]
    assert mean_return >= 475.0, f"best evaluations {evaluations}"
    assert step <= 300_000


def _returns(rows, key="episode_return"):
    return [r[key] for r in rows if key in r]


def test_a2c_improves_on_cartpole(tmp_path):
    result = train("GPUCartPole-v1", A2CConfig(num_steps=5), num_envs=16, total_steps=48_000,
                   seed=1, run_dir=str(tmp_path), log_interval=50, eval_episodes=20, **COMMON)
    returns = _returns(result.metrics)
    assert returns[0] < 40.0  # random-like start
    assert max(returns[-3:]) >= 100.0, returns
    assert result.evaluation["mean_return"] >= 100.0, result.evaluation


@pytest.mark.slow  # 24,000 steps of DDPG: 20-50 s on 2 cores
def test_ddpg_improves_on_pendulum(tmp_path):
    config = DDPGConfig(learning_starts=1600, gradient_steps=2, batch_size=128,
                        hidden_sizes=(64, 64), gamma=0.98, buffer_size=20_000)
    result = train("GPUPendulum-v1", config, num_envs=8, total_steps=24_000, seed=1,
                   run_dir=str(tmp_path), log_interval=200, eval_episodes=10, **COMMON)
    returns = _returns(result.metrics)
    # random play scores about -1200 on Pendulum; a learning critic/actor pair gets far
    # above it within a few thousand gradient steps
    assert returns[0] < -900.0, returns
    assert result.evaluation["mean_return"] > -750.0, (returns, result.evaluation)


def test_box_and_multi_agent_smoke(tmp_path):
    """PPO with Box actions and A2C with separate Tag policies run end to end."""
    result = train("GPUMountainCarContinuous-v0", PPOConfig(num_steps=8, normalize_obs=True),
                   num_envs=4, total_steps=64, run_dir=str(tmp_path / "mcc"), eval_episodes=0,
                   **COMMON)
    assert result.global_step == 64
    result = train("GPUTagGrid-v0", A2CConfig(num_steps=4), num_envs=2, total_steps=176,
                   run_dir=str(tmp_path / "grid"), eval_episodes=2, log_interval=1, **COMMON)
    assert set(result.evaluation["policies"]) == {"tagger", "runner"}
    assert any("tagger/loss" in row for row in result.metrics)
