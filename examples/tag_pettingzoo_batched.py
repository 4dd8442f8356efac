"""Tag through the batched PettingZoo view: G games at once, dicts of device tensors.

    python examples/tag_pettingzoo_batched.py --num-games 1024 --steps 500

``gpu_vecenv.parallel_env("GPUTag-v0", num_games=G)`` is a PettingZoo ``ParallelEnv`` whose
values are tensors ``[G, ...]`` per agent name (``tagger_0 …``, ``runner_0 …``). Here every
agent acts at random; taggers and runners keep separate return totals on the device.

CPU threads: ``--threads`` (default 1) sets torch's CPU thread count. On a few cores shared
with other work, torch's default (one thread per core) makes small tensor ops several
times slower, not faster (docs/adapters.md, "CPU threads"); ``--threads 0`` keeps it.
"""

from __future__ import annotations

import argparse
import time

import torch

import gpu_vecenv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="GPUTag-v0", help="GPUTag-v0 or GPUTagGrid-v0")
    parser.add_argument("--num-games", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (0: torch's default, one per core)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    env = gpu_vecenv.parallel_env(args.env_id, num_games=args.num_games, device=device)
    observations, infos = env.reset(seed=args.seed)
    first = env.possible_agents[0]
    print(f"{len(env.possible_agents)} agents: {env.possible_agents}")
    print(f"observations[{first!r}]: {tuple(observations[first].shape)} on "
          f"{observations[first].device}; action space {env.action_space(first)}")

    team_return = {"tagger": torch.zeros((), device=device),
                   "runner": torch.zeros((), device=device)}
    games_ended = torch.zeros((), dtype=torch.int64, device=device)
    start = time.perf_counter()
    for _ in range(args.steps):
        actions = {}
        for agent in env.possible_agents:
            space = env.action_space(agent)  # one game's space; draw G of them on the device
            nvec = torch.as_tensor(space.nvec if hasattr(space, "nvec") else space.n,
                                   device=device)
            shape = (args.num_games, *space.shape)
            actions[agent] = (torch.rand(shape, device=device) * nvec).long()
        observations, rewards, terminations, truncations, infos = env.step(actions)
        for agent, reward in rewards.items():
            team_return[agent.rsplit("_", 1)[0]] += reward.sum()
        games_ended += truncations[first].sum() + terminations[first].sum()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    env.close()

    agent_steps = args.num_games * len(env.possible_agents) * args.steps
    print(f"{args.num_games} games x {args.steps} steps in {elapsed:.2f}s "
          f"({agent_steps / elapsed:,.0f} agent-steps/s)")
    print(f"total reward per game: taggers {float(team_return['tagger']) / args.num_games:.2f}, "
          f"runners {float(team_return['runner']) / args.num_games:.2f}; "
          f"tagger_0 saw {int(games_ended)} episode ends")


if __name__ == "__main__":
    main()
