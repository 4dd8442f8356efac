"""Train a policy with PPO, A2C or DDPG on a GPU vector env.

Examples:
  gpu-vecenv train --env GPUCartPole-v1                  (the env's shipped config)
  gpu-vecenv train cartpole_ppo.yaml --set trainer.num_envs=8192 --set ppo.num_steps=16
  gpu-vecenv train --env GPUPendulum-v1 --algo ddpg --total-steps 200000 --device cuda
  gpu-vecenv train --resume runs/GPUCartPole-v1__ppo__1__20260101-120000

Settings are applied in this order: defaults, the YAML file (a path, or the name of a
shipped config such as cartpole_ppo), --section.key flags, --set, then the shortcuts
(--env, --algo, --num-envs, --total-steps, --seed, --device, --run-dir, --no-progress).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from pathlib import Path

from gpu_vecenv.train.config import SECTIONS
from gpu_vecenv.train.config_loading import field_docs, load_yaml, type_name

_SHORTCUTS = {"env": "env", "algo": "algo", "num_envs": "num_envs",
              "total_steps": "total_steps", "seed": "seed", "device": "device",
              "run_dir": "run_dir"}


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the ``train`` options to ``parser``; every config field gets a
    ``--section.key`` option whose help is the field's docstring."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("config", nargs="?", default=None,
                        help="YAML config file, or a shipped config name (e.g. cartpole_ppo);"
                             " default: the shipped config of --env")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE",
                        help="override one config key (YAML value syntax); repeatable, any "
                             "depth: --set policies.tagger.ppo.learning_rate=1e-3")
    parser.add_argument("--env", help="trainer.env: registered env id")
    parser.add_argument("--algo", choices=["ppo", "a2c", "ddpg"], help="trainer.algo")
    parser.add_argument("--num-envs", type=int, help="trainer.num_envs")
    parser.add_argument("--total-steps", type=int, help="trainer.total_steps")
    parser.add_argument("--seed", type=int, help="trainer.seed")
    parser.add_argument("--device", help="trainer.device (auto, cpu, cuda, cuda:1, ...)")
    parser.add_argument("--run-dir", help="trainer.run_dir: output directory")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="continue the run in RUN_DIR from its latest checkpoint (its "
                             "config.yaml is the base config)")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config as YAML and exit")
    for section, cls in SECTIONS.items():
        docs = field_docs(cls)
        hints = typing.get_type_hints(cls)
        group = parser.add_argument_group(f"{section} settings",
                                          (cls.__doc__ or "").strip().splitlines()[0])
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            group.add_argument(f"--{section}.{f.name}", dest=f"field:{section}.{f.name}",
                               default=argparse.SUPPRESS,
                               metavar=type_name(hints[f.name]).replace(" ", "_"),
                               help=f"{docs.get(f.name, '')} (default: {default!r})")


def resolve_config(args: argparse.Namespace):
    """The validated config of the command line (no env is built)."""
    from gpu_vecenv.train.config_loading import apply_override, config_from_dict
    from gpu_vecenv.train.presets import CONFIG_DIR, default_config_path

    raw: dict = {}
    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / "config.yaml").is_file():
            raise FileNotFoundError(f"--resume: {run_dir} holds no config.yaml (not a run "
                                    "directory)")
        raw = load_yaml(run_dir / "config.yaml")
        if args.config:
            raise ValueError("give either a config file or --resume, not both")
    elif args.config:
        path = Path(args.config)
        if not path.exists():
            shipped = CONFIG_DIR / (args.config if args.config.endswith(".yaml")
                                    else f"{args.config}.yaml")
            path = shipped if shipped.is_file() else path
        raw = load_yaml(path)
    else:
        from gpu_vecenv.registry import get_entry

        env_id = args.env or "GPUCartPole-v1"
        get_entry(env_id)
        path = default_config_path(env_id, args.algo)
        if path is not None:
            raw = load_yaml(path)
    for key, value in vars(args).items():
        if key.startswith("field:"):
            apply_override(raw, f"{key[len('field:'):]}={value}")
    for assignment in args.overrides:
        apply_override(raw, assignment)
    trainer = raw.setdefault("trainer", {})
    if not isinstance(trainer, dict):
        raise TypeError("section 'trainer' must be a mapping")
    for flag, key in _SHORTCUTS.items():
        value = getattr(args, flag, None)
        if value is not None:
            trainer[key] = value
    if args.no_progress:
        trainer["progress"] = False
    if args.resume:
        trainer["run_dir"] = str(args.resume)
    return config_from_dict(raw)


def main(args: argparse.Namespace) -> int:
    from gpu_vecenv.train.config_loading import save_yaml
    from gpu_vecenv.train.trainer import Trainer

    config = resolve_config(args)
    if args.print_config:
        import sys
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            save_yaml(config, Path(tmp) / "config.yaml")
            sys.stdout.write((Path(tmp) / "config.yaml").read_text())
        return 0
    trainer = Trainer(config, resume=bool(args.resume))
    t = config.trainer
    print(f"training {t.env} with {t.algo} on {trainer.device} ({trainer.env.backend_name} "
          f"backend): {trainer.num_slots} slots x {trainer.steps_per_iteration} steps per "
          f"iteration, {trainer.num_iterations} iterations; run directory {trainer.run_dir}",
          flush=True)
    result = trainer.run()
    rate = (result.global_step - (trainer.resumed_from or 0)) / max(result.seconds, 1e-9)
    print(f"done: {result.global_step:,} env steps in {result.seconds:.1f} s "
          f"({rate:,.0f} env-steps/s)")
    if result.metrics:
        last = result.metrics[-1]
        returns = {k: round(v, 2) for k, v in last.items() if k.endswith("episode_return")}
        if returns:
            print(f"last training returns: {returns}")
    if result.evaluation is not None:
        print(_format_evaluation(result.evaluation))
    print(f"checkpoint: {result.run_dir / 'checkpoints' / 'latest.pt'}")
    return 0


def _format_evaluation(ev: dict) -> str:
    text = (f"evaluation over {ev['episodes']} episodes: mean return {ev['mean_return']:.2f}"
            f" (std {ev['std_return']:.2f}), mean length {ev['mean_length']:.1f}")
    if len(ev["policies"]) > 1:
        text += "".join(f"\n  {name}: {p['mean_return_per_agent']:.3f} per agent, "
                        f"{p['mean_return_per_game']:.3f} per game"
                        for name, p in ev["policies"].items())
    return text
