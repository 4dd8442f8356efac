"""How much device time the trainer's loop leaves idle around its logged rows: the
PureJaxRL comparison's CartPole PPO (scripts/bench_vs_purejaxrl.py's settings) trained by
``Trainer.run`` with ``--log-interval`` rows, each row timed on the host:

- ``wait``: from the row's wait (its checks queued) to the device being done;
- ``stall``: from the device being done to the next iteration's roll-out launched (the row's
  reads, checks, callback, writer, progress and the next iteration's host work): the device
  idles for that long, once per row;
- the rate between the first and last rows (as the comparison measured it before it
  started from the second row), the intervals between the rows' host marks and the
  garbage collections during the run (``--gc-freeze``: ``gc.freeze()`` first).

In a fresh process the rate from the first row fell 7-13 % short of the rows' intervals at
16,384 envs: the first row's divergence check (its first ``_foreach_norm``, ``stack``,
``isfinite``) takes 56-115 ms once, before its wait (data
``docs/data/training_vs_peers_h200/equal_precision/loop_overhead_*``).

    python scripts/lab/trainer_loop_overhead.py out.json --num-envs 16384 --log-intervals 10,1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def one_run(num_envs: int, log_interval: int, iterations: int, seed: int,
            freeze: bool = False) -> dict:
    import gc

    import bench_vs_purejaxrl as bench
    import torch

    from gpu_vecenv.train import trainer as trainer_module
    from gpu_vecenv.train.config_loading import config_from_dict
    from gpu_vecenv.train.trainer import Trainer

    args = argparse.Namespace(num_steps=16, learning_rate=2.5e-4)
    marks: list[tuple[str, float]] = []
    real_wait = trainer_module.wait_for_device

    def timed_wait(device, request):
        marks.append(("row", time.perf_counter()))
        real_wait(device, request)
        marks.append(("done", time.perf_counter()))

    rows: list[dict] = []
    collections: list[tuple[int, float]] = []  # (generation, seconds) of each collection
    started: dict[int, float] = {}

    def gc_timer(phase, info):
        if phase == "start":
            started[info["generation"]] = time.perf_counter()
        else:
            collections.append((info["generation"],
                                time.perf_counter() - started.pop(info["generation"])))

    settings = {"env": "GPUCartPole-v1", "num_envs": num_envs,
                "total_steps": iterations * num_envs * 16, "seed": seed, "device": "auto",
                "log_interval": log_interval, "progress": False, "tensorboard": False,
                "eval_episodes": 0, "checkpoint_interval": 0}
    with tempfile.TemporaryDirectory() as run_dir:
        config = config_from_dict({"trainer": {**settings, "run_dir": run_dir},
                                   "ppo": bench.ppo_settings(args)})
        trainer_module.wait_for_device = timed_wait
        try:
            with Trainer(config, callback=lambda row: rows.append(row) or True) as trainer:
                phases = trainer.phases
                real_collect = phases.collect

                def timed_collect():
                    marks.append(("collect", time.perf_counter()))
                    return real_collect()

                phases.collect = timed_collect
                if freeze:
                    gc.freeze()
                gc.callbacks.append(gc_timer)
                try:
                    trainer.run()
                finally:
                    gc.callbacks.remove(gc_timer)
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
        finally:
            trainer_module.wait_for_device = real_wait
    waits, stalls = [], []
    for i, (kind, t) in enumerate(marks):
        if kind == "done":
            waits.append(t - marks[i - 1][1])
            nxt = next((u for k, u in marks[i + 1:] if k == "collect"), None)
            if nxt is not None:
                stalls.append(nxt - t)
    row_times = [t for k, t in marks if k == "row"]
    intervals = [round(1e3 * (b - a), 2)
                 for a, b in zip(row_times[:-1], row_times[1:], strict=True)]
    first, last = rows[0], rows[-1]
    rate = (last["global_step"] - first["global_step"]) / (last["time"] - first["time"])
    return {"num_envs": num_envs, "log_interval": log_interval, "rows": len(rows),
            "env_steps_per_second": rate,
            "stall_ms_median": 1e3 * statistics.median(stalls) if stalls else None,
            "stall_ms": [round(1e3 * s, 3) for s in stalls[:20]],
            "wait_ms_median": 1e3 * statistics.median(waits) if waits else None,
            "row_intervals_ms": intervals, "gc_freeze": freeze,
            "collections": [(g, round(1e3 * s, 3)) for g, s in collections],
            "gen2_ms": round(1e3 * sum(s for g, s in collections if g == 2), 3)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("output")
    parser.add_argument("--num-envs", type=int, default=16384)
    parser.add_argument("--log-intervals", default="10,1")
    parser.add_argument("--iterations", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--gc-freeze", action="store_true",
                        help="gc.freeze() before Trainer.run (the objects made so far never "
                             "collected)")
    args = parser.parse_args()
    results = []
    for r in range(args.repeats):
        for interval in [int(v) for v in args.log_intervals.split(",")]:
            result = one_run(args.num_envs, interval, args.iterations, seed=1,
                             freeze=args.gc_freeze)
            result["repeat"] = r
            results.append(result)
            print(json.dumps({k: v for k, v in result.items()
                              if k not in ("stall_ms", "collections")}), flush=True)
    Path(args.output).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
