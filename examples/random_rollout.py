"""Random roll-out through the plain Gymnasium API: thousands of envs, tensors on the device.

    python examples/random_rollout.py --env-id GPUCartPole-v1 --num-envs 4096 --steps 1000

``gymnasium.make_vec`` finds our ids without importing gpu_vecenv first. Everything the loop
touches (actions, observations, rewards, episode returns) is a torch tensor on ``--device``;
the only host transfer is the summary printed at the end. The actions come from
``envs.sample_actions()``: uniform over the action space, drawn on the device from the
env's seeds (the device-side counterpart of ``action_space.sample()``), so the whole run
is reproducible from ``--seed``.

CPU threads: ``--threads`` (default 1) sets torch's CPU thread count. On a few cores shared
with other work, torch's default (one thread per core) makes small tensor ops several
times slower, not faster (docs/adapters.md, "CPU threads"); ``--threads 0`` keeps it.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="GPUCartPole-v1")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (0: torch's default, one per core)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    envs = gym.make_vec(args.env_id, num_envs=args.num_envs, device=device)
    obs, _ = envs.reset(seed=args.seed)
    n = envs.num_envs  # for Tag: games x agents
    episode_return = torch.zeros(n, device=device)
    finished_returns = torch.zeros((), device=device)
    finished = torch.zeros((), dtype=torch.int64, device=device)

    start = time.perf_counter()
    for _ in range(args.steps):
        actions = envs.sample_actions()
        obs, reward, terminated, truncated, _ = envs.step(actions)
        episode_return += reward
        done = terminated | truncated
        # NEXT_STEP autoreset (the default): a done env resets on its next step
        finished_returns += torch.where(done, episode_return, 0.0).sum()
        finished += done.sum()
        episode_return = torch.where(done, 0.0, episode_return)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    envs.close()

    episodes = int(finished)
    mean = float(finished_returns) / max(episodes, 1)
    print(f"{args.env_id}: {n} envs x {args.steps} steps on {device} in {elapsed:.2f}s "
          f"({n * args.steps / elapsed:,.0f} steps/s); {episodes} episodes, "
          f"mean return {mean:.2f}")


if __name__ == "__main__":
    main()
