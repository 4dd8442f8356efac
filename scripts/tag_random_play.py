"""Random taggers against random runners under a Tag config's rules, on the CPU.

How much of a game random play wins tells whether a config leaves both teams room to
learn: with WarpDrive's 10 taggers and 100 runners (``tag_ppo``) random taggers tag 95 %
of the runners, so trained taggers cannot show much. This plays ``--games`` full games of
each config with uniformly random actions through the torch reference's step (no
observations: random play reads none) and prints the share of runners tagged and their
mean step of being tagged. No GPU needed; seconds per config.

    python scripts/tag_random_play.py tag_ppo tag_taggers_fast tag_same_speed tag_runners_fast
"""

from __future__ import annotations

import argparse

import torch

from gpu_vecenv.envs.tag import TagParams, reset, step
from gpu_vecenv.train.config_loading import load_config


def params_of(config_name: str) -> TagParams:
    """The continuous-Tag params of a config (its ``trainer.env_kwargs``)."""
    config = load_config(config_name)
    if config.trainer.env != "GPUTag-v0":
        raise SystemExit(f"{config_name} trains {config.trainer.env}, not GPUTag-v0")
    kwargs = dict(config.trainer.env_kwargs)
    preset = kwargs.pop("preset", None)
    return TagParams.warpdrive_training(**kwargs) if preset else TagParams(**kwargs)


def random_play(params: TagParams, games: int, seed: int) -> tuple[float, float]:
    """(share of runners tagged, their mean step of being tagged) over ``games`` games."""
    generator = torch.Generator().manual_seed(seed)
    agents, taggers = params.num_agents, params.num_taggers
    state = reset(params, torch.rand((games, agents, 3), generator=generator))
    never = float(params.episode_length + 1)
    tagged_at = torch.full((games, params.num_runners), never)
    for t in range(1, params.episode_length + 1):
        actions = torch.stack(
            [torch.randint(0, params.num_acceleration_actions, (games, agents),
                           generator=generator),
             torch.randint(0, params.num_turn_actions, (games, agents), generator=generator)],
            dim=-1)
        out = step(params, state, actions)
        tagged_at = torch.where(out.left[:, taggers:] & (tagged_at == never),
                                torch.tensor(float(t)), tagged_at)
        state = out.state
    tagged = tagged_at < never
    mean_step = tagged_at[tagged].mean().item() if tagged.any() else float("nan")
    return tagged.float().mean().item(), mean_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", help="shipped config names or YAML paths")
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("config | taggers x runners | speeds (tagger, runner) | runners tagged | mean step")
    for name in args.configs:
        p = params_of(name)
        share, mean_step = random_play(p, args.games, args.seed)
        print(f"{name} | {p.num_taggers} x {p.num_runners} | {p.max_speed_tagger:g}, "
              f"{p.max_speed_runner:g} | {100 * share:.1f} % | {mean_step:.0f}", flush=True)


if __name__ == "__main__":
    main()
