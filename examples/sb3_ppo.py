"""Stable-Baselines3's PPO, unmodified, on a GPU env through the SB3 adapter.

    python examples/sb3_ppo.py                          # CartPole: ~100k steps, return 500
    python examples/sb3_ppo.py --total-timesteps 2048   # a smoke run

SB3 keeps its rollout buffer in numpy, so each step costs one device-to-host copy (the
adapter packs obs, reward, done and final obs into one transfer). For training at GPU
scale with nothing leaving the device, see examples/cleanrl_ppo.py.

CPU threads: ``--threads`` (default 1) sets torch's CPU thread count. On a few cores shared
with other work, torch's default (one thread per core) makes small tensor ops several
times slower, not faster (docs/adapters.md, "CPU threads"); ``--threads 0`` keeps it.
"""

from __future__ import annotations

import argparse

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecMonitor

from gpu_vecenv.adapters.sb3 import SB3VecEnv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="GPUCartPole-v1")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--total-timesteps", type=int, default=100_000)
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--device",
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="device of the envs",
    )
    parser.add_argument(
        "--policy-device",
        default="cpu",
        help="device of SB3's networks (small MLPs run best on the CPU)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (0: torch's default, one per core)",
    )
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    venv = VecMonitor(SB3VecEnv(args.env_id, num_envs=args.num_envs, device=args.device))
    venv.seed(args.seed)
    # rl-baselines3-zoo's tuned CartPole-v1 hyperparameters
    batch_size = min(256, 32 * venv.num_envs)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=32,
        batch_size=batch_size,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=lambda progress: 1e-3 * progress,
        clip_range=lambda progress: 0.2 * progress,
        seed=args.seed,
        device=args.policy_device,
        verbose=0,
    )
    model.learn(args.total_timesteps)

    eval_env = VecMonitor(
        SB3VecEnv(args.env_id, num_envs=min(args.eval_episodes, 10), device=args.device)
    )
    eval_env.seed(args.seed + 1000)
    mean, std = evaluate_policy(
        model, eval_env, n_eval_episodes=args.eval_episodes, deterministic=True
    )
    print(
        f"{args.env_id}: PPO after {args.total_timesteps} steps: "
        f"mean return {mean:.1f} +/- {std:.1f} over {args.eval_episodes} episodes"
    )


if __name__ == "__main__":
    main()
