"""Train PPO on GPUCartPole-v1 with the native trainer, then evaluate it.

    python examples/train_cartpole.py                       # GPU if there is one
    python examples/train_cartpole.py --device cpu --num-envs 16 --total-steps 500000

Everything (envs, roll-out storage, sampling, updates) stays on --device. The run
directory holds config.yaml, metrics.jsonl, TensorBoard logs and checkpoints/latest.pt;
`gpu-vecenv eval RUN_DIR --episodes 100 --gif cartpole.gif` replays it.
"""

from __future__ import annotations

import argparse

from gpu_vecenv.train import PPOConfig, train

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--device", default="auto", help="torch device (default: auto)")
parser.add_argument("--num-envs", type=int, default=16, help="parallel envs")
parser.add_argument("--total-steps", type=int, default=500_000, help="env steps")
parser.add_argument("--eval-episodes", type=int, default=100, help="evaluation episodes")
parser.add_argument("--seed", type=int, default=1)
args = parser.parse_args()

result = train(
    "GPUCartPole-v1",
    PPOConfig(num_steps=32, learning_rate=2.5e-4, update_epochs=4, num_minibatches=4),
    num_envs=args.num_envs, total_steps=args.total_steps, seed=args.seed,
    device=args.device, eval_episodes=args.eval_episodes, tensorboard=False,
)
print(f"{result.global_step:,} env steps in {result.seconds:.1f} s; run in {result.run_dir}")
if result.evaluation:
    print(f"mean return over {result.evaluation['episodes']} episodes: "
          f"{result.evaluation['mean_return']:.1f}")
