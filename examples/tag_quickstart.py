"""Tag in three views: Gymnasium (agents as vector slots), batched PettingZoo, and a GIF.

    python examples/tag_quickstart.py [--device cuda] [--games 1024] [--gif tag.gif]

CPU threads: ``--threads`` (default 1) sets torch's CPU thread count. On a few cores shared
with other work, torch's default (one thread per core) makes small tensor ops several
times slower, not faster (docs/adapters.md, "CPU threads"); ``--threads 0`` keeps it.
"""

from __future__ import annotations

import argparse

import gymnasium
import torch

import gpu_vecenv
from gpu_vecenv.tag_render import record_episode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="torch device (default: cuda if any)")
    parser.add_argument("--games", type=int, default=1024)
    parser.add_argument("--gif", default=None, help="also write a GIF of one game here")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (0: torch's default, one per core)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    # Gymnasium: G games; every agent is one slot (slot = game * agents + agent).
    env = gymnasium.make_vec("GPUTag-v0", num_games=args.games, device=args.device,
                             preset="warpdrive_training", autoreset_mode="same_step")
    obs, info = env.reset(seed=0)
    print(f"{env.num_games} games x {env.num_agents} agents = {env.num_envs} slots, "
          f"obs {tuple(obs.shape)} on {obs.device}, backend {env.backend_name}")
    nvec = torch.as_tensor(env.single_action_space.nvec, device=obs.device)
    tagged = 0
    for _ in range(100):
        actions = (torch.rand((env.num_envs, 2), device=obs.device) * nvec).long()
        obs, reward, terminated, truncated, info = env.step(actions)
        tagged += int((terminated & (info["role"] == 1)).sum())  # role 1: runner
    print(f"runners tagged in 100 steps: {tagged}")

    # PettingZoo, batched: {agent name: tensor [games, ...]}.
    par = gpu_vecenv.parallel_env("GPUTagGrid-v0", num_games=args.games, device=args.device)
    observations, infos = par.reset(seed=0)
    actions = {a: torch.randint(0, 5, (args.games,), device=par.device) for a in par.agents}
    observations, rewards, terminations, truncations, infos = par.step(actions)
    print(f"grid: {len(par.agents)} agents, runner obs {tuple(observations['runner_0'].shape)}")

    if args.gif:
        path = record_episode("GPUTag-v0", args.gif, device=args.device, num_runners=20,
                              tagging_distance=0.05)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
