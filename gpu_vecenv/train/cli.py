"""Train a policy with PPO, A2C or DDPG on a GPU vector env.

Examples:
  gpu-vecenv train --env GPUCartPole-v1        (the env's shipped config; stops when solved)
  gpu-vecenv train cartpole_ppo --set trainer.num_envs=8192 --set ppo.num_steps=16
  gpu-vecenv train --env GPUPendulum-v1 --total-steps 200000 --device cuda
  gpu-vecenv train --resume runs/GPUCartPole-v1__ppo__1__20260101-120000
  gpu-vecenv train cartpole_ppo --gpus 4     (data-parallel, one process per GPU)

Settings apply in this order: defaults, the config (a shipped name or a YAML file),
--SECTION.KEY VALUE options, --set, then the shortcuts (--env, --algo, --num-envs, ...).
Every config key can be set; --help-config lists them with the values this command would
use. Ctrl-C saves a checkpoint and prints the command that resumes the run.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import signal
import sys
import traceback
import typing
from pathlib import Path

from gpu_vecenv import cuda_warmup
from gpu_vecenv.train.config import SECTIONS
from gpu_vecenv.train.config_help import config_help, config_yaml
from gpu_vecenv.train.config_loading import load_yaml
from gpu_vecenv.train.config_values import type_name

_SHORTCUTS = {"env": "env", "algo": "algo", "num_envs": "num_envs",
              "global_num_envs": "num_envs_global",
              "total_steps": "total_steps", "seed": "seed", "device": "device",
              "run_dir": "run_dir"}

EXIT_INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT, as shells report it); after SIGTERM 143."""
USER_ERRORS = (ValueError, TypeError, KeyError, FileNotFoundError, RuntimeError)
"""The errors that ``gpu_vecenv.cli.main`` reports in one line (exit status 2), not as a
traceback."""
EXIT_SHUTDOWN_HUNG = 3
"""Exit status when leaving the process group did not finish in its time limit."""


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the ``train`` options to ``parser``. Every config key is also an option
    ``--SECTION.KEY VALUE``, left out of ``--help`` (``--help-config`` lists the keys)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("config", nargs="?", default=None, metavar="CONFIG",
                        help="a shipped config name (gpu-vecenv configs lists them) or a YAML "
                             "file; default: the shipped config of --env")
    parser.add_argument("--env", metavar="ID",
                        help="env id (default GPUCartPole-v1; gpu-vecenv list shows them)")
    parser.add_argument("--algo", choices=["ppo", "a2c", "ddpg"],
                        help="algorithm (default: the config's; with --env alone, the env's "
                             "shipped config for it)")
    parser.add_argument("--num-envs", type=_num_envs, metavar="N",
                        help="parallel envs (games for Tag), or auto: the largest power of "
                             "two that fits the device (trainer.autoscale); default: the "
                             "config's")
    parser.add_argument("--global-num-envs", type=int, metavar="N",
                        help="parallel envs (games) of all GPUs together, split evenly over "
                             "the ranks of a data-parallel run (trainer.num_envs_global); "
                             "instead of --num-envs, which is per GPU")
    parser.add_argument("--total-steps", type=int, metavar="N",
                        help="env steps to train for; default: the config's")
    parser.add_argument("--seed", type=int, metavar="S", help="seed (default: the config's)")
    parser.add_argument("--device", metavar="D",
                        help="auto (default: cuda if there is one), cpu, cuda, cuda:1, ...")
    parser.add_argument("--run-dir", metavar="DIR",
                        help="output directory (default runs/<env>__<algo>__<seed>__<time>)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE",
                        help="set any config key (YAML syntax); repeatable: --set "
                             "ppo.learning_rate=1e-3 --set trainer.stop_at_return=null")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar or progress lines")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="continue the run in RUN_DIR from its latest checkpoint")
    parser.add_argument("--overwrite", action="store_true",
                        help="start afresh in a --run-dir that holds a run (deletes its "
                             "checkpoints and logs)")
    parser.add_argument("--gpus", type=int, metavar="N",
                        help="train data-parallel on N GPUs of this machine: starts torchrun "
                             "with one process per GPU (several nodes: run torchrun "
                             "-m gpu_vecenv.train yourself; docs/training.md)")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config as YAML and exit")
    parser.add_argument("--help-config", action="store_true",
                        help="list every config key with its meaning and the value this "
                             "command would use, and exit")
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            parser.add_argument(f"--{section}.{f.name}", dest=f"field:{section}.{f.name}",
                                default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                                metavar=type_name(hints[f.name]).replace(" ", "_"))


def _num_envs(text: str) -> int | str:
    """``--num-envs``: an int or ``auto``."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int or auto, got {text!r}") from None


def resolve_config(args: argparse.Namespace):
    """The validated config of the command line (no env is built)."""
    from gpu_vecenv.train.config_loading import config_from_dict

    return config_from_dict(raw_config(args))


def raw_config(args: argparse.Namespace) -> dict:
    """The command line's settings as a config mapping, not yet validated (validating
    imports the env's definition, and with it torch)."""
    from gpu_vecenv.train.config_loading import apply_override
    from gpu_vecenv.train.shipped_configs import default_config_path, resolve_config_path

    raw: dict = {}
    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / "config.yaml").is_file():
            raise FileNotFoundError(f"--resume: {run_dir} holds no config.yaml (not a run "
                                    "directory)")
        if args.config:
            raise ValueError("give either a config or --resume, not both")
        if args.overwrite:
            raise ValueError("give either --resume or --overwrite, not both")
        raw = load_yaml(run_dir / "config.yaml")
    elif args.config:
        raw = load_yaml(resolve_config_path(args.config))
    else:
        from gpu_vecenv.env_ids import get_entry

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
    if args.num_envs is not None and args.global_num_envs is not None:
        raise ValueError("give --num-envs (per GPU) or --global-num-envs (all GPUs "
                         "together), not both")
    if args.num_envs is not None:  # per GPU, as asked: a config's global batch gives way
        trainer["num_envs_global"] = None
    for flag, key in _SHORTCUTS.items():
        value = getattr(args, flag, None)
        if value is not None:
            trainer[key] = value
    if args.no_progress:
        trainer["progress"] = False
    if args.resume:
        trainer["run_dir"] = str(args.resume)
    return raw


def main(args: argparse.Namespace) -> int:
    from gpu_vecenv.train.config_loading import config_from_dict

    raw = raw_config(args)
    device = raw["trainer"].get("device", "auto")
    if isinstance(device, str) and args.gpus in (None, 1) and not (
            args.help_config or args.print_config):  # this process will train on `device`:
        cuda_warmup.start(device)  # CUDA starts while torch is imported (next line)
    config = config_from_dict(raw)
    if args.help_config:
        sys.stdout.write(config_help(config, args))
        return 0
    if args.print_config:
        sys.stdout.write(config_yaml(config))
        return 0
    from gpu_vecenv.train import distributed

    if args.gpus is not None and args.gpus != 1:
        if distributed.launched():
            raise ValueError("--gpus starts torchrun itself: under torchrun leave it out")
        return _run_torchrun(args.gpus, _train_argv(args))
    succeeded = False
    try:
        status = _train(args, config)
        succeeded = status in (0, 128 + signal.SIGINT, 128 + signal.SIGTERM)
        return status
    except Exception as exc:
        if not distributed.active():
            raise
        if distributed.is_peer_failure(exc):
            # The rank that failed prints the cause; the others say only that they stopped.
            return distributed.stop_after_peer_failure(exc, "gpu-vecenv train")
        # Said here, before leaving the group (which may have to be cut short), as
        # gpu_vecenv.cli says it for a single process.
        if isinstance(exc, USER_ERRORS):
            print(f"gpu-vecenv train: error: {exc}", file=sys.stderr, flush=True)
            return 2
        traceback.print_exc()
        return 1
    finally:
        if not distributed.shutdown(succeeded):
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_SHUTDOWN_HUNG)


def _train(args: argparse.Namespace, config) -> int:
    import warnings

    from gpu_vecenv.train.run_directory_errors import NoCheckpointYet, RunDirectoryInUse
    from gpu_vecenv.train.trainer import Trainer

    with warnings.catch_warnings(record=True) as caught:
        try:
            trainer = Trainer(config, resume=bool(args.resume), overwrite=args.overwrite)
        except (RunDirectoryInUse, NoCheckpointYet) as exc:  # said in Python terms
            raise exc.for_command_line() from None
    with trainer:  # closed (its CUDA graphs released) before the process group is left
        return _train_and_report(args, trainer, caught)


def _train_and_report(args: argparse.Namespace, trainer, caught: list) -> int:
    from gpu_vecenv.train import distributed
    from gpu_vecenv.train.evaluation import format_evaluation
    from gpu_vecenv.train.stopping import TrainingInterrupted

    config = trainer.config
    if trainer.rank > 0:  # rank 0 speaks for a data-parallel run; errors still show
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (until the process ends)
        caught = []
    for warning in caught:  # one line each, not Python's file:line + source format
        print(f"gpu-vecenv train: warning: {warning.message}", file=sys.stderr, flush=True)
    t = config.trainer
    run = shlex.quote(str(trainer.run_dir))
    if args.resume:
        if trainer.finished is not None:
            print(_finished_message(trainer, run))
            return 0
        print(f"resuming {trainer.run_dir} from step {trainer.global_step:,} (iteration "
              f"{trainer.iteration:,} of {trainer.num_iterations:,})")
    ranks = (f" x {trainer.world_size} ranks ({distributed.backend()}, data-parallel)"
             if trainer.distributed else "")
    print(f"training {t.env} with {t.algo} on {trainer.device}{ranks} "
          f"({trainer.env.backend_name} backend): {trainer.num_slots} slots"
          f"{' per rank' if trainer.distributed else ''} x {trainer.steps_per_iteration} steps per "
          f"iteration, {trainer.num_iterations} iterations"
          + (f", until the mean return reaches {_thresholds(trainer)}"
             if trainer.return_thresholds else "")
          + f"; run directory {trainer.run_dir}", flush=True)
    try:
        result = trainer.run()
    except TrainingInterrupted as stop:
        if trainer.rank > 0:
            return 128 + stop.signum
        print(f"interrupted at step {stop.global_step:,} of "
              f"{trainer.num_iterations * trainer.batch:,}; checkpoint saved: "
              f"{stop.checkpoint}\nresume with: {_resume_command(trainer)} --resume {run}",
              file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt as exc:  # a second signal, or Ctrl-C during the evaluation
        if trainer.rank == 0:
            print(f"\ninterrupted: {_what_is_left(trainer, run)}", file=sys.stderr)
        return 128 + getattr(exc, "signum", signal.SIGINT)
    if result.stopped == "stop_at_return":
        print(f"solved: {_reached(result.recent_returns, trainer.return_thresholds)} at step "
              f"{result.global_step:,} (of total_steps {t.total_steps:,})"
              f"{_checked(trainer.stop_check, t.stop_check_episodes)}; stopping early")
    print(_done_line(result, trainer.resumed_from))
    if result.metrics:
        last = result.metrics[-1]
        returns = {k: round(v, 2) for k, v in last.items() if k.endswith("episode_return")}
        if returns:
            print(f"last training returns: {returns}")
    if result.evaluation is not None:
        print(format_evaluation(result.evaluation))
    print(f"checkpoint: {result.run_dir / 'checkpoints' / 'latest.pt'}")
    return 0


def _done_line(result, resumed_from: int | None) -> str:
    """The summary of this process's training: its own steps, time and rate (after a
    resume, not the whole run's steps; the run's total follows)."""
    steps = result.global_step - (resumed_from or 0)
    rate = f"{steps / max(result.seconds, 1e-9):,.0f} env-steps/s"
    if not resumed_from:
        return f"done: {steps:,} env steps in {result.seconds:.1f} s ({rate})"
    return (f"done: {steps:,} env steps this session, in {result.seconds:.1f} s ({rate}); the "
            f"run is at step {result.global_step:,} (resumed at {resumed_from:,})")


def _train_argv(args: argparse.Namespace) -> list[str]:
    """The ``train`` arguments of this command line without ``--gpus N``."""
    argv = list(getattr(args, "argv", None) or sys.argv[1:])
    if "train" in argv:
        argv = argv[argv.index("train") + 1:]
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--gpus":
            skip = True
        elif not arg.startswith("--gpus="):
            out.append(arg)
    return out


def _run_torchrun(gpus: int, argv: list[str]) -> int:
    """Run ``torchrun --standalone --nproc-per-node gpus -m gpu_vecenv.train argv`` (one
    worker per GPU of this machine) and return its status. Ctrl-C and SIGTERM are passed
    on to torchrun, which passes them to every worker (each saves and exits 128 + the
    signal); this command then exits 128 + the signal too, whatever torchrun's own status
    (1 when its workers were stopped by a signal)."""
    import subprocess

    import torch

    if gpus < 1:
        raise ValueError(f"--gpus {gpus}: give 1 or more")
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if visible < gpus:
        raise ValueError(f"--gpus {gpus}, but torch sees {visible} CUDA GPU(s) here "
                         "(CUDA_VISIBLE_DEVICES?). A CPU run of several processes (gloo): "
                         "python -m torch.distributed.run --nproc-per-node N -m "
                         "gpu_vecenv.train ... --device cpu")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={gpus}", "-m", "gpu_vecenv.train", *argv]
    print("starting: " + shlex.join(command), flush=True)
    sys.stderr.flush()
    received: list[int] = []
    child = subprocess.Popen(command)

    def forward(signum, frame) -> None:
        received.append(signum)
        child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        status = child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if received and status != 0:
        return 128 + received[0]
    return status


def _what_is_left(trainer, run: str) -> str:
    """After a Ctrl-C that did not save: how to go on from the run directory."""
    from gpu_vecenv.train.run_directory import has_logged_rows

    if trainer.finished is not None and trainer.saved_step == trainer.global_step:
        return (f"training had finished and is saved (step {trainer.global_step:,}); "
                f"evaluate it with: gpu-vecenv eval {run}")
    if trainer.saved_step is not None:
        return (f"stopped without saving; the last checkpoint (step "
                f"{trainer.saved_step:,}) resumes with: {_resume_command(trainer)} --resume "
                f"{run}")
    if has_logged_rows(trainer.run_dir):
        return ("stopped without saving, before the first checkpoint; start afresh with "
                f"--run-dir {run} --overwrite")
    return "stopped before anything was trained; the same command starts the run again"


def _resume_command(trainer) -> str:
    """The command that resumes ``trainer``'s run: on as many processes as it has."""
    if not getattr(trainer, "distributed", False):
        return "gpu-vecenv train"
    return f"torchrun --nproc-per-node {trainer.world_size} -m gpu_vecenv.train"


def _thresholds(trainer) -> str:
    thresholds = trainer.return_thresholds
    if list(thresholds) == ["default"]:
        return f"{thresholds['default']:g}"
    return ", ".join(f"{name} {value:g}" for name, value in thresholds.items())


def _reached(recent: dict[str, tuple[float, int]], thresholds: dict[str, float]) -> str:
    """``mean return 481.20 over the last 104 episodes >= 475``, per policy if several."""
    parts = []
    for name, threshold in thresholds.items():
        mean, count = recent[name]
        who = "" if name == "default" else f"{name}: "
        parts.append(f"{who}mean return {mean:.2f} over the last {count} episodes >= "
                     f"{threshold:g}")
    return "; ".join(parts)


def _checked(check: dict | None, episodes: int) -> str:
    """``, and the deterministic policy's mean over 100 episodes is 500.00`` (per policy
    if several) when a stop check decided, else nothing."""
    if not check or not episodes:
        return ""
    values = ", ".join(f"{value:.2f}" if name == "default" else f"{name} {value:.2f}"
                       for name, value in check["returns"].items())
    return (f", and the deterministic policy's mean return over {episodes} episodes is "
            f"{values}")


def _finished_message(trainer, run: str) -> str:
    t = trainer.config.trainer
    if trainer.finished == "stop_at_return":
        return (f"run {trainer.run_dir} is already finished: "
                f"{_reached(trainer.recent_returns(), trainer.return_thresholds)} at step "
                f"{trainer.global_step:,} (trainer.stop_at_return). Nothing to train; to "
                f"train on: gpu-vecenv train --resume {run} --set trainer.stop_at_return=null;"
                f" to evaluate: gpu-vecenv eval {run}")
    return (f"run {trainer.run_dir} is already finished: {trainer.global_step:,} env steps "
            f"trained (total_steps {t.total_steps:,}). Nothing to train; to train longer: "
            f"gpu-vecenv train --resume {run} --total-steps {2 * t.total_steps}; to "
            f"evaluate: gpu-vecenv eval {run}")
