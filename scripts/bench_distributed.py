"""Benchmark data-parallel training (torchrun, NCCL) on the GPUs of one machine; JSON out.

    python scripts/bench_distributed.py bench_distributed.json --gpus 1,2   # 2-GPU machine
    python scripts/bench_distributed.py --model                            # no GPU needed

For each world size in ``--gpus`` (each run a fresh ``torchrun --standalone`` of
``python -m gpu_vecenv.train CONFIG``; world size 1 also without torchrun, the plain
single-process run, to show what the process group costs):

1. ``throughput``: ``--iterations`` PPO iterations of cartpole_ppo with ``--num-envs``
   envs per rank, and ``--tag-iterations`` of tag_ppo with its shipped 100 games per
   rank (weak scaling: each GPU keeps its envs, the global batch grows with the ranks);
   the rate is global steps/s (vector slots: agent-steps for Tag) between the first and
   the last logged row (compilation and warm-up excluded). Each run's exit status and
   wall time are recorded too: a run that does not end fails the benchmark (a time
   limit of ``--limit`` seconds per run).
2. ``time_to_475``: the shipped cartpole_ppo (stops when the mean return of the last
   100+ episodes reaches 475), once with 16 envs per rank (``--num-envs``: the shipped
   size on every rank) and once with the shipped global batch split over the ranks
   (``--global-num-envs 16``: 16 / N per rank); reports the seconds from start to the
   stop (training time from the logged rows, and the whole command's wall time), env
   steps and whether it stopped solved.

``--model`` prints (and with an output file stores) the all-reduce model of the shipped
configs: bytes all-reduced per update from their parameter counts, ring all-reduce
traffic ``2 (N - 1) / N x bytes`` per GPU, time over an ASSUMED bus bandwidth and
latency (``--bus-gbps``, ``--latency-us``): a model, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRAIN = ["-m", "gpu_vecenv.train", "--no-progress", "--set", "trainer.tensorboard=false",
         "--set", "trainer.eval_episodes=0", "--set", "trainer.checkpoint_interval=0"]
LIMIT_S = 300.0
STEPS_PER_ITERATION = {"cartpole_ppo": 32, "tag_ppo": 32 * 110}
"""vector steps per env (game) and iteration: num_steps x slots per env"""


def launch(world_size: int, args: list[str], run: Path, torchrun: bool = True
           ) -> tuple[float, int]:
    """Run ``gpu_vecenv.train args`` (run directory ``run``) on ``world_size`` processes;
    (wall seconds, status; -9 when it outlived :data:`LIMIT_S` and every process of it,
    found by its run directory, was killed)."""
    prefix = ([sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={world_size}"] if torchrun else [sys.executable])
    log = run.parent / f"{run.name}.log"
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen([*prefix, *TRAIN, *args, "--run-dir", str(run)], stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        status = proc.wait(LIMIT_S)
    except subprocess.TimeoutExpired:
        subprocess.run(["pkill", "-9", "-f", str(run)], check=False)  # torchrun's workers too
        proc.wait()
        status = -9
    wall = time.perf_counter() - t0
    if status != 0:
        sys.stderr.write(f"{args}: status {status} after {wall:.1f} s\n"
                         f"{log.read_text()[-4000:]}\n")
    return wall, status


def rows_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def throughput(config: str, world_size: int, num_envs: int, iterations: int,
               torchrun: bool, tmp: Path) -> dict:
    run = tmp / f"throughput-{config}-{world_size}-{num_envs}-{int(torchrun)}"
    steps = iterations * world_size * num_envs * STEPS_PER_ITERATION[config]
    wall, status = launch(world_size, [config, "--num-envs", str(num_envs), "--total-steps",
                                       str(steps), "--set", "trainer.stop_at_return=null",
                                       "--set", "trainer.log_interval=5"], run, torchrun)
    out = {"config": config, "world_size": world_size,
           "launcher": "torchrun" if torchrun else "plain",
           "num_envs_per_rank": num_envs, "iterations": iterations, "wall_seconds": wall,
           "status": status}
    if status == 0:
        rows = rows_of(run)
        first, last = rows[0], rows[-1]
        out["env_steps_per_second"] = ((last["global_step"] - first["global_step"])
                                       / max(last["time"] - first["time"], 1e-9))
    return out


def time_to_475(world_size: int, form: str, seed: int, tmp: Path) -> dict:
    """``form``: ``per_gpu`` (16 envs on every rank) or ``global`` (16 envs in all)."""
    run = tmp / f"ttt-{world_size}-{form}-{seed}"
    size = ["--num-envs", "16"] if form == "per_gpu" else ["--global-num-envs", "16"]
    wall, status = launch(world_size, ["cartpole_ppo", *size, "--seed", str(seed), "--set",
                                       "trainer.log_interval=1"], run)
    out = {"world_size": world_size, "form": form, "seed": seed,
           "num_envs_per_rank": 16 if form == "per_gpu" else 16 // world_size,
           "wall_seconds": wall, "status": status}
    if status == 0:
        last = rows_of(run)[-1]
        out.update(training_seconds=last["time"], env_steps=last["global_step"],
                   last_return=last.get("episode_return"),
                   solved="solved: mean return" in (run.parent / f"{run.name}.log").read_text())
    return out


def allreduce_model(world_sizes: list[int], bus_gbps: float, latency_us: float) -> list[dict]:
    """Bytes all-reduced per update of each shipped config and the modelled time."""
    import torch

    from gpu_vecenv.train import load_config
    from gpu_vecenv.train.policies import build_groups
    from gpu_vecenv.train.shipped_configs import shipped_config_paths
    from gpu_vecenv.train.training_env import make_env

    out = []
    for path in shipped_config_paths():
        config = load_config(path.stem, device="cpu", backend="torch", num_envs=1)
        env = make_env(config, torch.device("cpu"))
        groups = build_groups(config, env, torch.device("cpu"), torch.Generator())
        sizes = [sum(p.numel() for p in [*g.learner.model.actor.parameters(),
                                         *g.learner.model.critic.parameters()])
                 for g in groups]
        algo = config.policy_config(groups[0].name)
        if config.trainer.algo == "ddpg":  # critic every step, actor every policy_delay
            steps = algo.gradient_steps
        elif config.trainer.algo == "ppo":
            steps = algo.update_epochs * algo.num_minibatches
        else:
            steps = 1
        per_update = 4 * sum(sizes) * steps  # float32 gradients
        row = {"config": path.stem, "algo": config.trainer.algo, "parameters": sizes,
               "optimizer_steps_per_update": steps, "bytes_per_update": per_update}
        for n in world_sizes:
            traffic = 2 * (n - 1) / n * per_update
            # gradients, plus (PPO, A2C) the advantage mean and variance, per step
            calls = steps * len(sizes) * (1 if config.trainer.algo == "ddpg" else 3)
            row[f"model_ms_per_update_{n}_gpus"] = 1e3 * (
                calls * latency_us * 1e-6 + traffic / (bus_gbps * 1e9))
        out.append(row)
        env.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", help="JSON file to write")
    parser.add_argument("--gpus", default="1,2", help="world sizes to measure (default 1,2)")
    parser.add_argument("--num-envs", default="16384",
                        help="CartPole envs per rank (throughput)")
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--tag-iterations", type=int, default=30,
                        help="tag_ppo iterations (100 games per rank; 0: no Tag)")
    parser.add_argument("--parts", default="throughput,time_to_475",
                        help="what to measure (comma-separated)")
    parser.add_argument("--seeds", default="1", help="seeds of time_to_475 (e.g. 1,2,3)")
    parser.add_argument("--model", action="store_true", help="only the all-reduce model")
    parser.add_argument("--bus-gbps", type=float, default=400.0,
                        help="ASSUMED all-reduce bus bandwidth, GB/s (model only)")
    parser.add_argument("--latency-us", type=float, default=20.0,
                        help="ASSUMED latency of one small all-reduce, us (model only)")
    args = parser.parse_args()
    world_sizes = [int(x) for x in args.gpus.split(",")]
    result: dict = {"model_assumptions": {"bus_gbps": args.bus_gbps,
                                          "latency_us": args.latency_us}}
    result["model"] = allreduce_model(sorted({4, 8, 16, *world_sizes}), args.bus_gbps,
                                      args.latency_us)
    for row in result["model"]:
        print(json.dumps(row))
    if not args.model:
        import torch

        if torch.cuda.device_count() < max(world_sizes):
            raise SystemExit(f"--gpus {args.gpus}: this machine has "
                             f"{torch.cuda.device_count()} CUDA GPU(s)")
        result["device"] = torch.cuda.get_device_name(0)
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            result["throughput"] = []
            runs = [("cartpole_ppo", int(n), args.iterations) for n in args.num_envs.split(",")]
            if args.tag_iterations:
                runs.append(("tag_ppo", 100, args.tag_iterations))
            if "throughput" not in args.parts:
                runs = []
            for config, num_envs, iterations in runs:
                if 1 in world_sizes:
                    result["throughput"].append(
                        throughput(config, 1, num_envs, iterations, False, tmp))
                    print(json.dumps(result["throughput"][-1]), flush=True)
                for n in world_sizes:
                    result["throughput"].append(
                        throughput(config, n, num_envs, iterations, True, tmp))
                    print(json.dumps(result["throughput"][-1]), flush=True)
            result["time_to_475"] = []
            for seed in (int(x) for x in args.seeds.split(",") if "time_to_475" in args.parts):
                for n in world_sizes:
                    for form in ("per_gpu", "global") if n > 1 else ("per_gpu",):
                        result["time_to_475"].append(time_to_475(n, form, seed, tmp))
                        print(json.dumps(result["time_to_475"][-1]), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
