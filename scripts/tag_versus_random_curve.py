"""The 2x2 evaluation of a Tag run at each of its kept checkpoints: learning curves of
both teams against random play, by agent-steps and by training wall time.

The run must have kept its checkpoints (``--set trainer.keep_checkpoints=true``, with
``trainer.checkpoint_interval`` setting how often). For each ``checkpoints/step_*.pt``
this plays ``--episodes`` games under each pairing of trained or random taggers and
runners (:func:`gpu_vecenv.train.versus_random.versus_random`, the same seeds at every
checkpoint) and writes one JSON row per checkpoint: the step, the training seconds at
that step (from ``metrics.jsonl``), the four cells and both policies' entropy. With
``--plot`` it also draws the teams' training returns (``metrics.jsonl``), the runners
tagged per game of the four pairings against agent-steps and against wall time, and the
entropies.

    python scripts/tag_versus_random_curve.py RUN_DIR out.json --plot out.png --stochastic
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from gpu_vecenv.train.evaluation import load_models
from gpu_vecenv.train.versus_random import versus_random


def training_seconds(run_dir: Path) -> dict[int, float]:
    """global_step -> training seconds of each logged row of the run."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open() if line.strip()]
    return {int(r["global_step"]): float(r["time"]) for r in rows if "time" in r}


def curve(run_dir: Path, episodes: int, device: torch.device, seed: int,
          stochastic: bool) -> list[dict]:
    kept = sorted((run_dir / "checkpoints").glob("step_*.pt"))
    kept = [p for p in kept if ".rank" not in p.name]
    if not kept:
        raise SystemExit(f"{run_dir}/checkpoints holds no step_*.pt: train with "
                         "--set trainer.keep_checkpoints=true")
    seconds = training_seconds(run_dir)
    rows = []
    for path in kept:
        config, models, step = load_models(path, device)
        result = versus_random(config, models, episodes, device, seed=seed,
                               stochastic=stochastic)
        cells = {f"{p['taggers']}_taggers_{p['runners']}_runners": p
                 for p in result["pairings"]}
        rows.append({"global_step": step, "seconds": seconds.get(step), "cells": cells,
                     "entropy": result.get("entropy", {}),
                     "runners_per_game": result["runners_per_game"]})
        tagged = {k: round(v["runners_tagged_per_game"], 2) for k, v in cells.items()}
        print(f"step {step:,}: runners tagged per game {tagged}", flush=True)
    return rows


def plot(run_dir: Path, rows: list[dict], output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()
               if line.strip()]
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    for name in ("tagger", "runner"):
        points = [(r["global_step"] / 1e6, r[f"{name}/episode_return"]) for r in metrics
                  if f"{name}/episode_return" in r]
        if points:
            axes[0].plot(*zip(*points, strict=True), label=name)
    axes[0].set(title="training return (sampled actions)", xlabel="agent-steps (M)")
    axes[0].legend()
    steps = [r["global_step"] / 1e6 for r in rows]
    seconds = [r["seconds"] for r in rows]
    for key in rows[0]["cells"]:
        label = key.replace("_", " ")
        tagged = [r["cells"][key]["runners_tagged_per_game"] for r in rows]
        axes[1].plot(steps, tagged, marker="o", label=label)
        if None not in seconds:
            axes[2].plot(seconds, tagged, marker="o", label=label)
    axes[1].set(title="runners tagged per game", xlabel="agent-steps (M)")
    axes[1].legend(fontsize=7)
    axes[2].set(title="runners tagged per game", xlabel="training seconds")
    for name in rows[0]["entropy"]:
        axes[3].plot(steps, [r["entropy"][name]["mean"] for r in rows], marker="o",
                     label=name)
        uniform = rows[0]["entropy"][name]["uniform"]
        if uniform is not None:
            axes[3].axhline(uniform, color="gray", ls="--", lw=0.8)
    axes[3].set(title="entropy in the game (dashed: uniform)",
                xlabel="agent-steps (M)")
    axes[3].legend()
    fig.tight_layout()
    fig.savefig(output, dpi=90)
    print(f"wrote {output}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("output", help="JSON file of the rows")
    parser.add_argument("--plot", metavar="OUT.png")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stochastic", action="store_true",
                        help="sample actions from the policies (as they train)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(1)  # as the trainer: small networks only lose from more
    rows = curve(args.run_dir, args.episodes, torch.device(args.device), args.seed,
                 args.stochastic)
    Path(args.output).write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {args.output}")
    if args.plot:
        plot(args.run_dir, rows, args.plot)


if __name__ == "__main__":
    main()
