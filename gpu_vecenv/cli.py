"""``gpu-vecenv``: the command line.

Subcommands live in their own modules, imported only when used; each module exposes
``configure_parser(parser)`` and ``main(args) -> int``:

- ``list``  — registered envs and their spaces (here);
- ``configs`` — the shipped training configs (here);
- ``bench`` — throughput over env counts (:mod:`gpu_vecenv.bench`);
- ``train`` / ``eval`` — the native trainer (:mod:`gpu_vecenv.train.cli`);
- ``rollout`` — a random-action roll-out printing env-steps/s (here);
- ``compile`` — every shipped kernel into the cache (:mod:`gpu_vecenv.compile_cli`).

Bad input ends with one line on stderr and exit status 2; Ctrl-C with exit status 130.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import time
from importlib import metadata

DESCRIPTION = ("gpu-vecenv: GPU vector environments (Gymnasium, PettingZoo) and a native "
               "PPO/A2C/DDPG trainer")

_SUBCOMMANDS = {
    "bench": ("gpu_vecenv.bench", "throughput (env-steps/s) over a range of env counts"),
    "train": ("gpu_vecenv.train.cli", "train a policy with PPO, A2C or DDPG"),
    "eval": ("gpu_vecenv.train.eval_cli", "evaluate a trained policy (episodes, GIF)"),
    "compile": ("gpu_vecenv.compile_cli", "compile every shipped kernel into the cache"),
}


def _list_main(args: argparse.Namespace) -> int:
    from gpu_vecenv.entry_points import make_vec
    from gpu_vecenv.env_ids import ENVS

    for entry in ENVS.values():
        env = make_vec(entry.id, 1, device="cpu", backend="torch")
        print(f"{entry.id:30s} obs {env.single_observation_space}  "
              f"action {env.single_action_space}  "
              f"max_episode_steps {_time_limit(env)}")
        if args.verbose and entry.summary:
            print(f"{'':30s} {entry.summary}")
        env.close()
    return 0


def _time_limit(env) -> int | None:
    """The env's time limit: ``max_episode_steps`` (single-agent), or the params'
    ``episode_length`` (multi-agent: its games are truncated there; make_vec takes it as
    ``max_episode_steps`` too). Gymnasium's spec of a multi-agent id holds ``None``, so
    that it does not pass the limit twice."""
    if hasattr(env, "max_episode_steps"):
        return env.max_episode_steps
    return getattr(env.params, "episode_length", None)


def _shipped_config_rows() -> list[dict[str, object]]:
    """One row per shipped config: name, env, algo, num_envs, total_steps,
    stop_at_return, whether it is its env's default, and the first comment line."""
    from gpu_vecenv.train.config_loading import load_config
    from gpu_vecenv.train.shipped_configs import default_config_path, shipped_config_paths

    rows = []
    for path in shipped_config_paths():
        config = load_config(path)
        t = config.trainer
        first = path.read_text().splitlines()[0] if path.stat().st_size else ""
        rows.append(
            {
                "name": path.stem,
                "env": t.env,
                "algo": t.algo,
                "num_envs": t.num_envs,
                "total_steps": t.total_steps,
                "stop_at_return": t.stop_at_return,
                "default": default_config_path(t.env) == path,
                "summary": first.lstrip("# ").strip() if first.startswith("#") else "",
            }
        )
    return rows


def _configs_main(args: argparse.Namespace) -> int:
    from gpu_vecenv.train.shipped_configs import CONFIG_DIR

    rows = _shipped_config_rows()
    width = max(len(r["name"]) for r in rows)
    env_width = max(len(r["env"]) for r in rows)
    print(f"{'NAME':{width}}  {'ENV':{env_width}}  ALGO  {'ENVS':>5}  {'TOTAL STEPS':>12}  "
          "NOTES")
    for r in rows:
        notes = []
        if r["default"]:
            notes.append(f"default of --env {r['env']}")
        if r["stop_at_return"] is not None:
            notes.append(f"stops at return {r['stop_at_return']:g}"
                         if isinstance(r["stop_at_return"], float)
                         else f"stops at returns {r['stop_at_return']}")
        if args.verbose and r["summary"]:
            notes.append(r["summary"])
        print(f"{r['name']:{width}}  {r['env']:{env_width}}  {r['algo']:4}  "
              f"{r['num_envs']:>5}  {r['total_steps']:>12,}  {'; '.join(notes)}")
    print(f"\ntrain one: gpu-vecenv train NAME; see it whole: gpu-vecenv train NAME "
          f"--print-config;\nthe files (copy one to edit it): {CONFIG_DIR}")
    return 0


def _plain_text(docstring: str | None) -> str | None:
    """A module docstring as --help shows it: reST roles and literals as plain text
    (``:mod:`gpu_vecenv.bench``` -> gpu_vecenv.bench, ````x```` -> x)."""
    if docstring is None:
        return None
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", docstring)
    return text.replace("``", "")


def _version() -> str:
    from gpu_vecenv import __version__

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    return (f"gpu-vecenv {__version__} (torch {installed('torch')}, gymnasium "
            f"{installed('gymnasium')}, Python {sys.version.split()[0]})")


def _rollout_main(args: argparse.Namespace) -> int:
    import torch

    from gpu_vecenv.entry_points import make_vec

    env = make_vec(args.env, args.num_envs, device=args.device, backend=args.backend,
                   copy=False)
    env.reset(seed=args.seed)
    generator = torch.Generator(device=env.device).manual_seed(args.seed)
    sample = _action_sampler(env, generator)
    for _ in range(min(10, args.steps)):
        env.step(sample())
    if env.device.type == "cuda":
        torch.cuda.synchronize(env.device)
    start = time.perf_counter()
    total_reward = torch.zeros((), device=env.device)
    episodes = torch.zeros((), device=env.device, dtype=torch.int64)
    for _ in range(args.steps):
        _, reward, terminated, truncated, _ = env.step(sample())
        total_reward += reward.sum()
        episodes += (terminated | truncated).sum()
    if env.device.type == "cuda":
        torch.cuda.synchronize(env.device)
    elapsed = time.perf_counter() - start
    rate = args.steps * env.num_envs / elapsed
    print(f"{args.env}: {env.num_envs} envs x {args.steps} steps on {env.device} "
          f"({env.backend_name} backend): {rate:,.0f} env-steps/s, "
          f"{int(episodes)} episodes ended, mean reward/step "
          f"{float(total_reward) / (args.steps * env.num_envs):.3f}")
    env.close()
    return 0


def _action_sampler(env, generator):
    """Uniform random actions drawn on the env's device."""
    import gymnasium as gym
    import torch

    space, n, device = env.single_action_space, env.num_envs, env.device
    if isinstance(space, gym.spaces.Discrete):
        return lambda: torch.randint(int(space.start), int(space.start + space.n), (n,),
                                     device=device, generator=generator)
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = torch.as_tensor(space.nvec, device=device)
        return lambda: (torch.rand((n, *space.shape), device=device, generator=generator)
                        * nvec).long()
    low = torch.as_tensor(space.low, device=device)
    high = torch.as_tensor(space.high, device=device)
    return lambda: low + (high - low) * torch.rand((n, *space.shape), device=device,
                                                   generator=generator)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-vecenv", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="list the registered envs with their spaces")
    p.add_argument("-v", "--verbose", action="store_true", help="also print a summary")
    p.set_defaults(func=_list_main)

    p = sub.add_parser("configs", help="list the shipped training configs (gpu-vecenv train "
                                       "NAME trains one)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print each config's description")
    p.set_defaults(func=_configs_main)

    p = sub.add_parser("rollout", help="random-action roll-out; prints env-steps/s")
    p.add_argument("--env", default="GPUCartPole-v1", help="env id (default GPUCartPole-v1)")
    p.add_argument("--num-envs", type=int, default=1024, help="number of envs (default 1024)")
    p.add_argument("--steps", type=int, default=1000, help="steps to time (default 1000)")
    p.add_argument("--device", default=None, help="torch device (default: cuda if any)")
    p.add_argument("--backend", default="auto", choices=["auto", "cuda", "torch"])
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_rollout_main)

    for name, (module_name, help_text) in _SUBCOMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        p = sub.add_parser(name, help=help_text, description=_plain_text(module.__doc__))
        module.configure_parser(p)
        p.set_defaults(func=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    # A console script's sys.path starts at its bin/ folder, not here as `python -m` does:
    # append the working directory so that `--env my_module:MyEnv-v0` imports
    # ./my_module.py (appended, so it cannot shadow an installed module).
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        args = build_parser().parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # train --gpus re-launches
        try:
            return int(args.func(args) or 0)
        except (ValueError, TypeError, KeyError, FileNotFoundError, RuntimeError) as exc:
            print(f"gpu-vecenv {args.command}: error: {exc}", file=sys.stderr)
            return 2
    except KeyboardInterrupt:  # a subcommand that handles Ctrl-C itself returns 130
        print("\ninterrupted", file=sys.stderr)
        return 130


def console_main() -> None:
    """The ``gpu-vecenv`` command: :func:`main`, then the process ends without Python's
    teardown where that is safe (:mod:`gpu_vecenv.fast_exit`)."""
    from gpu_vecenv.fast_exit import exit_process

    exit_process(main())


if __name__ == "__main__":
    console_main()
