"""SB3's own PPO, unmodified, learns GPUCartPole-v1 through the adapter (seeded, bounded),
on the env exactly as ``gymnasium.make_vec`` makes it (NEXT_STEP autoreset; the adapter
gives SB3 the same steps as in SAME_STEP mode, see test_sb3.py)."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecMonitor

from gpu_vecenv.adapters.sb3 import SB3VecEnv


@pytest.mark.slow
def test_ppo_solves_cartpole():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small networks: one thread is fastest and deterministic
    try:
        venv = VecMonitor(SB3VecEnv(gym.make_vec("GPUCartPole-v1", num_envs=8, device="cpu")))
        venv.seed(0)
        # rl-baselines3-zoo's tuned CartPole-v1 settings, 80k of its 100k steps
        model = PPO(
            "MlpPolicy",
            venv,
            n_steps=32,
            batch_size=256,
            gae_lambda=0.8,
            gamma=0.98,
            n_epochs=20,
            ent_coef=0.0,
            learning_rate=lambda progress: 1e-3 * progress,
            clip_range=lambda progress: 0.2 * progress,
            seed=0,
            device="cpu",
            verbose=0,
        )
        model.learn(80_000)
        eval_env = VecMonitor(SB3VecEnv("GPUCartPole-v1", num_envs=10, device="cpu"))
        eval_env.seed(1000)
        mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=20, deterministic=True)
    finally:
        torch.set_num_threads(threads)
    assert mean >= 475.0
