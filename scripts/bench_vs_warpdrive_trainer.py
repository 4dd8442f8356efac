"""WarpDrive's own trainer against ours on its Tag training config: speed, then play.

    python scripts/bench_vs_warpdrive_trainer.py out.json --seconds 120
    python scripts/bench_vs_warpdrive_trainer.py out.json --iterations 20
    python scripts/bench_vs_warpdrive_trainer.py out.json --seconds 15 --rounds 5

(WarpDrive side: ``PYTHONPATH=$PEERS_PATH``; see .device-kit/README.md.) In one process,
on one GPU, three trainers learn WarpDrive 2.7.1's ``tag_continuous`` (100 games x 110
agents, 10 taggers and 100 runners, two policies):

- ``ours_a2c``: our A2C sized like WarpDrive's (250 steps a game per iteration: its batch of
  25,000 game steps; 256x256 ReLU; its coefficients: benchmarks/warpdrive_trainer_config.py);
- ``ours_ppo``: our shipped ``tag_ppo`` on the same game;
- ``warpdrive``: WarpDrive's ``TrainerA2C`` (PyCUDA), its own loop and ``perf_stats``
  (benchmarks/warpdrive_trainer_peer.py), last, so that a failure there keeps ours.

Each trains for ``--seconds`` of training time (roll-out + update; WarpDrive's
``perf_stats.total_time``, ours the logged ``time``) or for ``--iterations`` WarpDrive
iterations' worth of agent-steps (N x 2.75M). ``--rounds N`` trains every trainer N times,
alternating (a fresh trainer each time, as WarpDrive's rate moves between runs), and reports
each trainer's median round (the lower middle one for an even N; every round's rates are in
the JSON); the games below use the last round's policies. Reported: agent-steps/s over the
whole run and past its first iteration (warm-up), then for each trainer's policies the 2x2 games
against random play (:func:`gpu_vecenv.train.versus_random.versus_random`: runners tagged
per game by trained/random taggers among trained/random runners), with the most likely
actions and with sampled ones, on the same ``--eval-games`` games for all (seeded fresh
start layouts by default: no trainer saw them; WarpDrive's networks read our observations
through benchmarks/warpdrive_policy.py). Then the cross-play (:func:`cross_play`): each of our
trainers' taggers against WarpDrive's runners and WarpDrive's taggers against our runners,
which, beside each trainer's own trained-vs-trained cell, says whose taggers and whose
runners are better. Everything goes to the JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from gpu_vecenv.bench import PEERS_DIR, load_peer

TRAINERS = ("ours_a2c", "ours_ppo", "warpdrive")


def _peer(name: str):
    """``benchmarks/<name>.py`` of this checkout (not part of an installed package)."""
    module = load_peer(name)
    if module is None:
        raise SystemExit(f"{PEERS_DIR / (name + '.py')} is missing: this script runs from a "
                         "source checkout of gpu_vecenv (an editable install)")
    return module


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="JSON file to write")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=float,
                        help="training time of each trainer (roll-out + update)")
    budget.add_argument("--iterations", type=int,
                        help="WarpDrive iterations (each 25,000 game steps); ours train the "
                             "same agent-steps")
    parser.add_argument("--trainers", default=",".join(TRAINERS),
                        help=f"comma-separated, of {', '.join(TRAINERS)} (default: all)")
    parser.add_argument("--starts", choices=["fixed", "fresh"], default="fixed",
                        help="our training start layouts: fixed (one layout, WarpDrive's "
                             "way; default) or fresh (a new draw every episode)")
    parser.add_argument("--eval-starts", choices=["fixed", "fresh"], default="fresh",
                        help="start layouts of the 2x2 games (default fresh: seeded, the "
                             "same for every trainer)")
    parser.add_argument("--eval-games", type=int, default=100,
                        help="games per pairing of the 2x2 (default 100)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="train every trainer this many times, alternating; the table "
                             "shows each one's median round (default 1)")
    parser.add_argument("--seed", type=int, default=1, help="training seed of every trainer")
    parser.add_argument("--eval-seed", type=int, default=12345)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--write-configs", metavar="DIR",
                        help="only write our trainers' configs as YAML files into DIR "
                             "(ours_a2c.yaml, ours_ppo.yaml; e.g. for "
                             "scripts/profile_train.py) and exit")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE",
                        help="config override of our trainers (repeatable), e.g. "
                             "trainer.matmul_precision=high")
    args = parser.parse_args(argv)
    if args.seconds is None and args.iterations is None and args.write_configs is None:
        parser.error("give --seconds or --iterations (or --write-configs)")
    if (args.seconds is not None and args.seconds <= 0) or \
            (args.iterations is not None and args.iterations < 1):
        parser.error("--seconds must be > 0 and --iterations >= 1")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    args.trainers = [t.strip() for t in args.trainers.split(",") if t.strip()]
    unknown = sorted(set(args.trainers) - set(TRAINERS))
    if unknown or not args.trainers:
        parser.error(f"unknown trainers {unknown}; choose from {', '.join(TRAINERS)}")
    return args


def stop_callback(seconds: float | None, rows: list[dict]):
    """A ``Trainer`` callback that keeps every row and stops once ``time`` reaches
    ``seconds`` (None: never; ``total_steps`` stops the run)."""
    def callback(row: dict) -> bool:
        rows.append(row)
        return seconds is None or row["time"] < seconds
    return callback


def throughput(rows: list[dict]) -> dict[str, Any]:
    """Agent-steps/s of our logged rows (one per iteration): over the run, and from the
    end of the first iteration on (as WarpDrive's ``agent_steps_per_s_after_first``)."""
    first, last = rows[0], rows[-1]
    out = {"iterations": last["iteration"], "agent_steps": last["global_step"],
           "seconds": last["time"], "agent_steps_per_s": last["global_step"] / last["time"]}
    if len(rows) > 1:
        out["agent_steps_per_s_after_first"] = ((last["global_step"] - first["global_step"])
                                                / (last["time"] - first["time"]))
    return out


def median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The throughput of the median round by agent-steps/s (the lower middle one for an
    even count) among ``rounds`` (throughput dicts; ``{"error": ...}`` for a failed
    round, left out), with ``rounds`` and ``rounds_agent_steps_per_s`` added."""
    done = sorted((r for r in rounds if "agent_steps_per_s" in r),
                  key=lambda r: r["agent_steps_per_s"])
    if not done:
        raise ValueError("no round finished")
    return {**done[(len(done) - 1) // 2], "rounds": len(done),
            "rounds_agent_steps_per_s": [r.get("agent_steps_per_s") for r in rounds]}


def warpdrive_config() -> tuple[dict[str, Any], bool | None]:
    """WarpDrive's installed tag_continuous.yaml (else our copy) and whether it equals our
    copy (None: WarpDrive not importable)."""
    copy = _peer("warpdrive_trainer_config").WARPDRIVE_TAG_CONTINUOUS
    try:
        installed = _peer("warpdrive_trainer_peer").load_warpdrive_run_config()
    except ImportError:
        return copy, None
    return installed, installed == copy


def with_overrides(raw: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Our config ``raw`` with the ``--set`` overrides applied (in place)."""
    from gpu_vecenv.train.config_loading import apply_override

    for assignment in args.overrides:
        apply_override(raw, assignment)
    return raw


def run_ours(raw: dict[str, Any], args: argparse.Namespace, total_steps: int | None):
    """Train our config ``raw`` (``--set`` applied); returns ``(record, config, models)``."""
    from gpu_vecenv.train.config_loading import config_from_dict
    from gpu_vecenv.train.trainer import Trainer

    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as run_dir:
        with_overrides(raw, args)
        raw["trainer"].update(run_dir=run_dir, device=args.device)
        if total_steps is not None:
            raw["trainer"]["total_steps"] = total_steps
        config = config_from_dict(raw)
        began = time.time()
        # closed before the next trainer: its env and CUDA graphs free the GPU's memory
        with Trainer(config, callback=stop_callback(args.seconds, rows)) as trainer:
            built = time.time() - began
            result = trainer.run()
            models = {g.name: g.learner.model for g in trainer.groups}
            record = {"throughput": throughput(rows), "stopped": result.stopped,
                      "build_seconds": built, "agent_steps_per_iteration": trainer.batch,
                      "cuda_graphs": trainer.graphs is not None, "config": config.to_dict(),
                      "last_row": rows[-1]}
    return record, config, models


def eval_config(config, starts: str):
    """``config`` playing the 2x2 games on ``starts`` layouts."""
    kwargs = dict(config.trainer.env_kwargs, fixed_start_positions=starts == "fixed")
    return dataclasses.replace(config, trainer=dataclasses.replace(config.trainer,
                                                                   env_kwargs=kwargs))


def two_by_two(config, models: dict, args: argparse.Namespace) -> dict[str, Any]:
    """The 2x2 against random play, with the most likely and with sampled actions."""
    import torch

    from gpu_vecenv.train.versus_random import versus_random

    device = torch.device(args.device)
    cfg = eval_config(config, args.eval_starts)
    return {mode: versus_random(cfg, models, args.eval_games, device, seed=args.eval_seed,
                                stochastic=mode == "sampled")
            for mode in ("most_likely", "sampled")}


def cross_play(config, ours: dict, theirs: dict, args: argparse.Namespace) -> dict[str, Any]:
    """Our trained taggers against WarpDrive's trained runners and the other way round
    (``ours``, ``theirs``: ``{"tagger": model, "runner": model}``), most likely and sampled
    actions: the trained-vs-trained cell of each mixed 2x2. Against each trainer's own
    trained-vs-trained cell it says whose taggers and whose runners are better."""
    teams = {"our_taggers_vs_its_runners": {"tagger": ours["tagger"], "runner": theirs["runner"]},
             "its_taggers_vs_our_runners": {"tagger": theirs["tagger"], "runner": ours["runner"]}}
    out: dict[str, Any] = {}
    for label, models in teams.items():
        played = two_by_two(config, models, args)
        out[label] = {mode: next(p for p in result["pairings"]
                                 if (p["taggers"], p["runners"]) == ("trained", "trained"))
                      for mode, result in played.items()}
    return out


def run_warpdrive(wd_config: dict[str, Any], args: argparse.Namespace, a2c_config):
    """WarpDrive's trainer; returns ``(record, models)`` (its networks as our models)."""
    import torch

    from gpu_vecenv.envs.tag import TagParams, action_space
    from gpu_vecenv.train.distributions import ActionSpec

    out = _peer("warpdrive_trainer_peer").run_warpdrive_trainer(
        wd_config, seconds=args.seconds, iterations=args.iterations, seed=args.seed)
    params = TagParams(**a2c_config.trainer.env_kwargs)
    spec = ActionSpec.from_space(action_space(params))
    models = _peer("warpdrive_policy").warpdrive_policies(out["state_dicts"], params, spec,
                                                          torch.device(args.device))
    record = {"throughput": out["perf"], "build_seconds": out["build_seconds"],
              "warp_drive": out["warp_drive"], "run_config": out["run_config"],
              "taggers": out["taggers"], "runners": out["runners"]}
    return record, models


def environment() -> dict[str, Any]:
    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "host": platform.node()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def table(results: dict[str, Any]) -> str:
    """The throughput rows (with the ratio to WarpDrive's rate) and each trainer's 2x2
    (most likely actions)."""
    from gpu_vecenv.train.versus_random import format_table

    rates = {name: r["throughput"]["agent_steps_per_s"]
             for name, r in results["trainers"].items() if "throughput" in r}
    lines = [f"{'trainer':<10} {'iterations':>10} {'agent-steps':>14} {'seconds':>8} "
             f"{'agent-steps/s':>14} {'after 1st':>14} {'x warpdrive':>11}"]
    for name, r in results["trainers"].items():
        if "throughput" not in r:
            lines.append(f"{name:<10} FAILED: {r['error'].strip().splitlines()[-1]}")
            continue
        t = r["throughput"]
        ratio = (f"{rates[name] / rates['warpdrive']:.2f}" if "warpdrive" in rates
                 else "-")
        lines.append(f"{name:<10} {t['iterations']:>10} {t['agent_steps']:>14,} "
                     f"{t.get('seconds', t.get('total_time')):>8.1f} "
                     f"{t['agent_steps_per_s']:>14,.0f} "
                     f"{t.get('agent_steps_per_s_after_first', float('nan')):>14,.0f} "
                     f"{ratio:>11}")
    for name, r in results["trainers"].items():
        per_round = r.get("throughput", {}).get("rounds_agent_steps_per_s")
        if per_round:
            text = ", ".join("failed" if v is None else f"{v:,.0f}" for v in per_round)
            lines.append(f"{name}: agent-steps/s by round {text} (the median round above)")
    for name, r in results["trainers"].items():
        if "versus_random" in r:
            lines += ["", f"{name}:", format_table(r["versus_random"]["most_likely"])]
        elif "versus_random_error" in r:
            lines += ["", f"{name}: 2x2 FAILED: "
                      f"{r['versus_random_error'].strip().splitlines()[-1]}"]
    for name, r in results.get("cross_play", {}).items():
        lines += ["", f"cross-play, {name} against warpdrive (runners tagged per game / mean "
                      "steps to be tagged; most likely, sampled):"]
        if "error" in r:
            lines.append(f"  FAILED: {r['error'].strip().splitlines()[-1]}")
            continue
        for label, cells in r.items():
            text = ", ".join(f"{c['runners_tagged_per_game']:.2f} / {_steps(c)}"
                             for c in cells.values())
            lines.append(f"  {label.replace('our', name).replace('its', 'warpdrive')}: {text}")
    return "\n".join(lines)


def _steps(cell: dict) -> str:
    steps = cell["mean_steps_to_tag"]
    return "-" if steps is None else f"{steps:.1f}"


def train_one(name: str, wd_config: dict[str, Any], args: argparse.Namespace,
              fixed: bool, total: int | None):
    """Train trainer ``name``; returns ``(record, config it is evaluated under, models)``."""
    from gpu_vecenv.train.config_loading import config_from_dict

    cfg = _peer("warpdrive_trainer_config")
    if name == "warpdrive":  # its networks play as our A2C's policies (tagger, runner)
        a2c = config_from_dict(cfg.our_a2c_config(wd_config, fixed_starts=fixed))
        record, models = run_warpdrive(wd_config, args, a2c)
        return record, a2c, models
    make = cfg.our_a2c_config if name == "ours_a2c" else cfg.our_ppo_config
    return run_ours(make(wd_config, fixed_starts=fixed, seed=args.seed), args, total)


def write_configs(wd_config: dict[str, Any], args: argparse.Namespace) -> list[Path]:
    """Our trainers' configs (``--set`` applied) as YAML files in ``args.write_configs``."""
    from gpu_vecenv.train.config_loading import config_from_dict, save_yaml

    cfg = _peer("warpdrive_trainer_config")
    folder = Path(args.write_configs)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in (("ours_a2c", cfg.our_a2c_config), ("ours_ppo", cfg.our_ppo_config)):
        raw = with_overrides(make(wd_config, fixed_starts=args.starts == "fixed",
                                  seed=args.seed), args)
        save_yaml(config_from_dict(raw), folder / f"{name}.yaml")
        written.append(folder / f"{name}.yaml")
    return written


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = _peer("warpdrive_trainer_config")
    wd_config, copy_matches = warpdrive_config()
    if args.write_configs is not None:
        for path in write_configs(wd_config, args):
            print(f"wrote {path}")
        return 0
    total = (None if args.iterations is None
             else args.iterations * cfg.agent_steps_per_iteration(wd_config))
    fixed = args.starts == "fixed"
    results: dict[str, Any] = {
        "benchmark": "WarpDrive TrainerA2C vs our A2C and PPO, tag_continuous",
        "args": vars(args), "environment": environment(),
        "warpdrive_config": wd_config, "warpdrive_config_matches_our_copy": copy_matches,
        "game": dataclasses.asdict(cfg.tag_params(wd_config, fixed)),
        "a2c_differences": list(cfg.A2C_DIFFERENCES), "trainers": {}, "cross_play": {}}
    trained: dict[str, tuple[Any, dict]] = {}  # name: (the config it plays under, models)
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in args.trainers}
    for round_ in range(1, args.rounds + 1):
        last = round_ == args.rounds
        for name in args.trainers:
            print(f"training {name}" + (f", round {round_}" if args.rounds > 1 else "")
                  + " ...", flush=True)
            try:
                record, config, models = train_one(name, wd_config, args, fixed, total)
            except Exception:  # keep the others' results; say what failed
                record, models = {"error": traceback.format_exc()}, None
            rounds[name].append(record.get("throughput") or {"error": record["error"]})
            if args.rounds > 1:
                try:
                    record["throughput"] = median_round(rounds[name])
                except ValueError:  # no round of it finished yet
                    pass
            if last and models is not None:  # the games: the last round's policies
                print(f"2x2 of {name} ...", flush=True)
                try:
                    record["versus_random"] = two_by_two(config, models, args)
                except Exception:
                    record["versus_random_error"] = traceback.format_exc()
                trained[name] = (config, models)
            del models  # an earlier round's networks: the next trainer needs the memory
            results["trainers"][name] = record
            Path(args.output).write_text(json.dumps(results, indent=2, default=str) + "\n")
    if "warpdrive" in trained:
        wd_eval_config, wd_models = trained["warpdrive"]
        for name in (n for n in trained if n != "warpdrive"):
            print(f"cross-play of {name} and warpdrive ...", flush=True)
            try:
                results["cross_play"][name] = cross_play(wd_eval_config, trained[name][1],
                                                         wd_models, args)
            except Exception:
                results["cross_play"][name] = {"error": traceback.format_exc()}
        Path(args.output).write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(table(results))
    print(f"wrote {args.output}")
    failed = [n for n, r in results["trainers"].items()
              if "error" in r or "versus_random_error" in r]
    failed += [n for n, r in results["cross_play"].items() if "error" in r]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
