#!/usr/bin/env python3
"""Print the NVRTC path's benchmark figures against the nvcc + PyCUDA path's, point by
point, from the JSON files scripts/gpu_nvrtc_bench.sh writes (same call, same GPU).

    python scripts/compare_paths.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _load(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def _table(title: str, before: dict, after: dict) -> list[float]:
    print(f"\n{title}\n{'point':42s} {'nvcc+PyCUDA':>14s} {'NVRTC':>14s} {'ratio':>7s}")
    ratios = []
    for key in before:
        if key in after:
            ratio = after[key] / before[key]
            ratios.append(ratio)
            print(f"{key:42s} {before[key]:14,.0f} {after[key]:14,.0f} {ratio:7.3f}")
    return ratios


def main(out: Path) -> int:
    ratios = []
    pair = _load(out / "bench_before.json"), _load(out / "bench_after.json")
    if all(pair):
        before, after = ({f"{r['env']} {r['num_envs']:>8d} envs": r["env_steps_per_s"]
                          for r in d["results"] if r["backend"] == "cuda"} for d in pair)
        ratios += _table("env-steps/s (gpu-vecenv bench, copy=False)", before, after)
    pair = _load(out / "bench_tag_before.json"), _load(out / "bench_tag_after.json")
    if all(pair):
        before, after = ({r["case"]: r["env_steps_per_s"] for r in d["rows"]} for d in pair)
        ratios += _table("game-steps/s (scripts/bench_tag.py)", before, after)
    pair = _load(out / "bench_train_before.json"), _load(out / "bench_train_after.json")
    if all(pair):
        before, after = ({f"PPO {r['num_envs']} envs ({r['mode']})": r["env_steps_per_second"]
                          for r in d["results"] if r["mode"] == "throughput"} for d in pair)
        _table("PPO env-steps/s (scripts/bench_train.py)", before, after)
        for d, name in zip(pair, ("nvcc+PyCUDA", "NVRTC"), strict=True):
            for r in d["results"]:
                if r["mode"] == "time_to_475":
                    print(f"{name}: {r['num_envs']} envs reached 475 "
                          f"{r['seconds_since_process_start']:.2f} s after process start")
    if ratios:
        print(f"\nlowest ratio over the env and Tag points: {min(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
