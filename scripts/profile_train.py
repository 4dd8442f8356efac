"""Where one training iteration's time goes: roll-out against update, and the kernels of each.

    python scripts/profile_train.py tag_ppo out.json                    # a GPU
    python scripts/profile_train.py tag_same_speed out.json --set trainer.matmul_precision=high
    python scripts/profile_train.py tag_cpu out.json --device cpu --iterations 2   # smoke run

For a shipped config (or a YAML file; ``--set`` overrides as ``gpu-vecenv train`` takes
them) it builds the trainer in this process and measures, after ``--warmup`` iterations:

1. ``phases``: ``--iterations`` iterations run as the trainer runs them (CUDA graphs where
   the config allows), with a device sync after the roll-out and after the update, so the
   seconds of each are exact (as ``trainer.sync_timing`` does); agent-steps/s of the whole.
2. ``kernels``: the same number of iterations run eagerly (no CUDA graph, so the profiler
   sees each kernel) under ``torch.profiler``: per phase, the device time of each kernel
   name summed, the top ``--top`` of them, and the share of matrix products (kernel names
   of cuBLAS/CUTLASS GEMMs) in the update.

Nothing is written to a run directory but a temporary one. On a CPU the "kernels" are the
CPU time of torch's ops (the profiler's CPU view).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

GEMM_MARKERS = ("gemm", "cutlass", "xmma", "cublas", "matmul", "addmm", "mm")
"""Substrings (lower case) of the names of matrix-product kernels and ops."""


def is_gemm(name: str) -> bool:
    """Whether a kernel or op name is a matrix product (cuBLAS, CUTLASS, aten::mm...); a
    kernel ``torch.compile`` generated (``triton_...``, named after the ops it fuses, e.g.
    ``triton_poi_fused_addmm_relu_0``: the bias and activation around a product) is not."""
    lowered = name.lower()
    if lowered.startswith("triton"):
        return False
    return any(marker in lowered for marker in GEMM_MARKERS)


def build_trainer(config_name: str, overrides: list[str], device: str, run_dir: Path):
    from gpu_vecenv.train import load_config
    from gpu_vecenv.train.trainer import Trainer

    config = load_config(config_name, overrides, device=device, run_dir=str(run_dir),
                         tensorboard=False, progress=False, eval_episodes=0)
    return Trainer(config, overwrite=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_phases(trainer, iterations: int) -> dict:
    """Exact seconds of the roll-out and the update per iteration (synced after each)."""
    device = trainer.device
    rollout = update = 0.0
    for _ in range(iterations):
        sync(device)
        t0 = time.perf_counter()
        trainer.phases.collect()
        sync(device)
        t1 = time.perf_counter()
        trainer.phases.update()
        sync(device)
        rollout += t1 - t0
        update += time.perf_counter() - t1
    total = rollout + update
    return {"iterations": iterations, "graphed": bool(trainer.phases.captured),
            "rollout_seconds_per_iteration": rollout / iterations,
            "update_seconds_per_iteration": update / iterations,
            "rollout_share": rollout / total,
            "steps_per_second": trainer.batch * iterations / total}


def kernel_table(events, device_type: str, top: int) -> dict:
    """Per kernel (or op) name: summed self time in seconds; the top names, the total and
    the share of matrix products."""
    times: dict[str, float] = {}
    for event in events:
        if device_type == "cuda":
            if event.device_type != torch.autograd.DeviceType.CUDA:
                continue
            seconds = event.self_device_time_total * 1e-6
        else:
            seconds = event.self_cpu_time_total * 1e-6
        times[event.name] = times.get(event.name, 0.0) + seconds
    total = sum(times.values())
    gemm = sum(s for name, s in times.items() if is_gemm(name))
    ranked = sorted(times.items(), key=lambda item: -item[1])[:top]
    return {"total_seconds": total, "gemm_seconds": gemm,
            "gemm_share": gemm / total if total else 0.0,
            "top": [{"name": name, "seconds": s, "share": s / total if total else 0.0}
                    for name, s in ranked]}


def profile_kernels(trainer, iterations: int, top: int) -> dict:
    """The eager roll-out and update of ``iterations`` iterations under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    from gpu_vecenv.train.graphs import EagerLoop

    device = trainer.device
    eager = EagerLoop(trainer._collect, trainer._update)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    out = {}
    for phase, call in (("rollout", eager.collect), ("update", eager.update)):
        sync(device)
        with profile(activities=activities) as prof:
            for _ in range(iterations):
                call()
            sync(device)
        out[phase] = kernel_table(prof.events(), device.type, top)
        out[phase]["seconds_per_iteration"] = out[phase]["total_seconds"] / iterations
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="a shipped config name or a YAML file")
    parser.add_argument("out", help="JSON file to write")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE", help="config override (repeatable)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--warmup", type=int, default=12,
                        help="iterations before measuring (past the CUDA graph capture)")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--top", type=int, default=15, help="kernels listed per phase")
    args = parser.parse_args()
    if args.iterations < 1 or args.warmup < 0:
        parser.error("--iterations must be >= 1 and --warmup >= 0")
    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(args.config, args.overrides, args.device, Path(tmp) / "run")
        # an earlier commit's Trainer (PYTHONPATH=its tree, for a before/after in one call)
        # is not a context manager
        with trainer if hasattr(trainer, "__enter__") else contextlib.nullcontext(trainer):
            for _ in range(args.warmup):
                trainer.phases.collect()
                trainer.phases.update()
            result = {"config": args.config, "overrides": args.overrides,
                      "device": (torch.cuda.get_device_name(trainer.device)
                                 if trainer.device.type == "cuda" else "cpu"),
                      "torch": torch.__version__,
                      "float32_matmul_precision": torch.get_float32_matmul_precision(),
                      "steps_per_iteration": trainer.batch,
                      "phases": time_phases(trainer, args.iterations),
                      "kernels": profile_kernels(trainer, args.iterations, args.top)}
    Path(args.out).write_text(json.dumps(result, indent=1))
    p = result["phases"]
    how = "graphed" if p["graphed"] else "eager"
    print(f"{args.config} on {result['device']}: {p['steps_per_second']:,.0f} steps/s; "
          f"per iteration roll-out {1e3 * p['rollout_seconds_per_iteration']:.2f} ms, update "
          f"{1e3 * p['update_seconds_per_iteration']:.2f} ms ({how})")
    for phase, table in result["kernels"].items():
        print(f"\n{phase} (eager, profiled): {1e3 * table['seconds_per_iteration']:.2f} ms of "
              f"kernels per iteration, matrix products {100 * table['gemm_share']:.0f} %")
        for row in table["top"]:
            print(f"  {100 * row['share']:5.1f} %  {row['name'][:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
