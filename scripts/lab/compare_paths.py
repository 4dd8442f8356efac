#!/usr/bin/env python3
"""Print the "after" side's benchmark figures against the "before" side's, point by point,
from the JSON files scripts/lab/gpu_refactor_bench.sh (an earlier commit against this tree)
writes, both sides in the same call on the same GPU. Where a point was measured in several
rounds (``*_r<k>.json``), each side's median is used. The sides' names default to "before"
and "after"; docs/data/nvrtc_h200/ (nvcc + PyCUDA against NVRTC, written by a script since
removed) reads with ``nvcc+PyCUDA NVRTC``.

    python scripts/lab/compare_paths.py OUT_DIR [BEFORE_NAME AFTER_NAME]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def _points(out: Path, pattern: str, rows) -> dict[str, list[float]]:
    points: dict[str, list[float]] = {}
    for path in sorted(out.glob(pattern)):
        for key, value in rows(json.loads(path.read_text())):
            points.setdefault(key, []).append(value)
    return points


NAMES = ["before", "after"]


def _table(title: str, before: dict, after: dict) -> list[float]:
    print(f"\n{title}\n{'point':40s} {NAMES[0]:>14s} {NAMES[1]:>14s} {'ratio':>6s}  runs")
    ratios = []
    for key in before:
        if key in after:
            b, a = statistics.median(before[key]), statistics.median(after[key])
            ratios.append(a / b)
            print(f"{key:40s} {b:14,.0f} {a:14,.0f} {a / b:6.3f}  "
                  f"{len(before[key])}/{len(after[key])}")
    return ratios


def _env_rows(data):
    for r in data["results"]:
        if r["backend"] == "cuda":
            yield f"{r['env']} {r['num_envs']:>8d} envs", r["env_steps_per_s"]


def _tag_rows(data):
    for r in data["rows"]:
        yield r["case"], r["env_steps_per_s"]


def _train_rows(data):
    for r in data["results"]:
        if r["mode"] == "throughput":
            yield f"PPO {r['num_envs']} envs", r["env_steps_per_second"]


def main(out: Path) -> int:
    ratios = []
    for title, stem, rows in (("env-steps/s (gpu-vecenv bench, copy=False)", "bench", _env_rows),
                              ("game-steps/s (scripts/bench_tag.py)", "bench_tag", _tag_rows)):
        ratios += _table(title, _points(out, f"{stem}_before*.json", rows),
                         _points(out, f"{stem}_after*.json", rows))
    _table("PPO env-steps/s (scripts/bench_train.py)",
           _points(out, "bench_train_before*.json", _train_rows),
           _points(out, "bench_train_after*.json", _train_rows))
    for side, name in zip(("before", "after"), NAMES, strict=True):
        for path in out.glob(f"bench_train_{side}*.json"):
            for r in json.loads(path.read_text())["results"]:
                if r["mode"] == "time_to_475":
                    print(f"{name}: {r['num_envs']} envs reached 475 "
                          f"{r['seconds_since_process_start']:.2f} s after process start")
    if ratios:
        print(f"\nlowest ratio over the env and Tag points: {min(ratios):.3f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 3:
        NAMES[:] = sys.argv[2:4]
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
