"""Evaluate a trained policy: mean return over N episodes of the deterministic policy.

Examples:
  gpu-vecenv eval runs/GPUCartPole-v1__ppo__1__20260101-120000 --episodes 100
  gpu-vecenv eval runs/.../checkpoints/latest.pt --episodes 10 --gif cartpole.gif
  gpu-vecenv eval RUN_DIR --random          (the same statistics under uniform random play)
  gpu-vecenv eval TAG_RUN_DIR --random runner   (trained taggers against random runners)
  gpu-vecenv eval TAG_RUN_DIR --vs-random --stochastic  (trained/random taggers x runners)
"""

from __future__ import annotations

import argparse


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("path", metavar="RUN_DIR_OR_CHECKPOINT",
                        help="a run directory (its checkpoints/latest.pt) or a checkpoint file")
    parser.add_argument("--episodes", type=int, default=100,
                        help="episodes (games, for a multi-agent env) to play (default 100)")
    parser.add_argument("--gif", metavar="OUT.gif", default=None,
                        help="write a GIF of the first episode, at the env's render_fps "
                             "(needs an env that renders, and pip install "
                             "'gpu-vecenv[render]')")
    parser.add_argument("--device", default="auto", help="torch device (default: auto)")
    parser.add_argument("--seed", type=int, default=None,
                        help="evaluation seed (default: derived from the run's seed)")
    parser.add_argument("--random", nargs="?", const=True, default=False, metavar="POLICY",
                        help="play uniform random actions instead (a baseline); with a "
                             "policy name, only for that policy (e.g. --random runner)")
    parser.add_argument("--stochastic", action="store_true",
                        help="sample actions from the policy instead of taking the most "
                             "likely one (PPO, A2C)")
    parser.add_argument("--vs-random", action="store_true",
                        help="Tag: play the same games with trained and with random taggers "
                             "x trained and random runners and print the 2x2 table "
                             "(runners tagged, steps to be tagged, runners escaping)")
    parser.add_argument("--json", metavar="OUT.json", default=None,
                        help="also write the result as JSON")


def main(args: argparse.Namespace) -> int:
    from gymnasium.error import DependencyNotInstalled

    from gpu_vecenv.gif import check_env_draws
    from gpu_vecenv.train.evaluation import (
        evaluate,
        format_evaluation,
        load_models,
        write_evaluation,
    )
    from gpu_vecenv.train.training_env import trainer_device

    if args.episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {args.episodes}")
    device = trainer_device(args.device)
    config, models, step = load_models(args.path, device)
    if device.type == "cpu":  # as the trainer: small networks only lose from more threads
        import torch

        torch.set_num_threads(config.trainer.torch_threads or 1)
    if args.vs_random:
        return _versus_random(args, config, models, step, device)
    if args.gif:
        check_env_draws(config.trainer.env, "--gif")
    try:
        result = evaluate(config, models, args.episodes, device, seed=args.seed,
                          random_policy=args.random, stochastic=args.stochastic,
                          gif_path=args.gif)
    except DependencyNotInstalled as exc:
        # A missing optional library (pygame, Pillow) is a set-up problem: one line
        # naming the extra to install, reported as the CLI reports RuntimeErrors.
        raise RuntimeError(str(exc)) from None
    result["global_step"] = step
    who = f"checkpoint at step {step:,}"
    if args.random is True:
        who = "random play"
    elif args.random:
        who += f", {args.random} playing randomly"
    print(f"{config.trainer.env}, {who}: {format_evaluation(result)}")
    if args.gif:
        print(f"GIF written to {args.gif}")
    if args.json:
        write_evaluation(result, args.json)
    return 0


def _versus_random(args: argparse.Namespace, config, models, step: int, device) -> int:
    """``--vs-random``: the 2x2 table of :mod:`gpu_vecenv.train.versus_random`."""
    from gpu_vecenv.train.evaluation import write_evaluation
    from gpu_vecenv.train.versus_random import format_table, versus_random

    if args.random or args.gif:
        raise ValueError("--vs-random plays random policies itself; leave out --random "
                         "and --gif")
    result = versus_random(config, models, args.episodes, device, seed=args.seed,
                           stochastic=args.stochastic)
    result["global_step"] = step
    print(f"{config.trainer.env}, checkpoint at step {step:,}: {format_table(result)}")
    if args.json:
        write_evaluation(result, args.json)
    return 0
