"""Train taggers and runners of GPUTag-v0 at the same time, as two PPO policies, then
compare the taggers' catch with random play.

    python examples/train_tag.py                                  # GPU if there is one
    python examples/train_tag.py --device cpu --games 4 --total-steps 500000

Uses the shipped config (WarpDrive's training preset: 10 taggers, 100 runners) with
its `policies` map: `tagger` and `runner` each have their own network and optimizer.
Vector slots are agents (slot = game * 110 + agent); --total-steps counts agent-steps.
"""

from __future__ import annotations

import argparse

import torch

from gpu_vecenv.train import Trainer, default_config_path, evaluate, load_config

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--device", default="auto", help="torch device (default: auto)")
parser.add_argument("--games", type=int, default=100, help="parallel games")
parser.add_argument("--total-steps", type=int, default=20_000_000, help="agent-steps")
parser.add_argument("--eval-games", type=int, default=20, help="evaluation games")
args = parser.parse_args()

config = load_config(default_config_path("GPUTag-v0"), [
    f"trainer.num_envs={args.games}", f"trainer.total_steps={args.total_steps}",
    f"trainer.device={args.device}", "trainer.eval_episodes=0", "trainer.tensorboard=false",
])
trainer = Trainer(config)
result = trainer.run()
print(f"{result.global_step:,} agent-steps in {result.seconds:.1f} s; run in {result.run_dir}")
device = torch.device(trainer.device)
trained = evaluate(config, trainer.groups, args.eval_games, device)
random = evaluate(config, trainer.groups, args.eval_games, device, random_policy=True)
versus_random = evaluate(config, trainer.groups, args.eval_games, device,
                         random_policy="runner")
tag_reward = trainer.env.params.tag_reward_for_tagger
for name, ev in (("trained taggers vs trained runners", trained),
                 ("trained taggers vs random runners", versus_random),
                 ("random taggers vs random runners", random)):
    tags = ev["policies"]["tagger"]["mean_return_per_game"] / tag_reward
    print(f"{name}: {tags:.1f} runners tagged per game ({ev['episodes']} games, "
          f"mean length {ev['mean_length']:.0f} steps)")
