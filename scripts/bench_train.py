"""Benchmark the native trainer: end-to-end PPO env-steps/s and time to return 475 on
GPUCartPole-v1, with a roll-out / update breakdown; writes JSON.

    python scripts/bench_train.py bench_train.json                    # GPU defaults
    python scripts/bench_train.py out.json --device cpu --sizes 64 --iterations 20
    python scripts/bench_train.py tag.json --env GPUTag-v0 --sizes 2000 --iterations 20 \
        --env-kwargs '{"preset": "warpdrive_training", "num_taggers": 5, "num_runners": 100}'

Per env count (default 2,048 and 16,384; 16 steps per env, 4 epochs x 4 minibatches,
the anchors of issue 5) it runs three measurements, each in a fresh Python process:

1. ``throughput``: ``--iterations`` PPO iterations, metrics read every 10; the rate is
   taken between the first and the last read (compilation and warm-up excluded).
2. ``breakdown``: the same with ``trainer.sync_timing=true`` (a device sync after the
   roll-out and after the update, so their times are exact); reports seconds per
   iteration of each and the share of the roll-out.
3. ``time_to_475``: trains until the mean training return of the episodes finished in
   an iteration reaches 475 (read every iteration); reports seconds since the process
   started (interpreter, imports and CUDA start-up included) and since training
   started, the env steps used, and a check by 100 evaluation episodes (CartPole only).

Each measurement runs once per ``--fused`` setting (``trainer.fused_kernels``, default
null: the fused PPO kernels where they apply) and per ``--graphs`` setting (default on a
GPU ``true,false``: the roll-out and update captured as CUDA graphs, then eager), so their
effects are measured in the same call. ``time_to_475`` also reports where the time
before training went (imports, building the trainer: CUDA start-up, kernel loading,
networks; the first iteration).

With ``--env`` another env is measured (throughput and breakdown; ``--sizes`` counts
games for Tag, and the rates are agent-steps/s).
"""

from __future__ import annotations

import time

_PROCESS_T0 = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402


def process_start_time() -> float:
    """Wall-clock start of this process (Linux: /proc; elsewhere: the script's start)."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = float(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - uptime + start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return _PROCESS_T0


def _agents(args: argparse.Namespace) -> int:
    """Vector slots per env (agents per game for a multi-agent env)."""
    from gpu_vecenv.entry_points import make_vec

    env = make_vec(args.env, 1, device="cpu", backend="torch", **json.loads(args.env_kwargs))
    agents = env.num_envs
    env.close()
    return agents


def worker(args: argparse.Namespace) -> dict:
    """One measurement in this process; returns its JSON-able result."""
    import torch

    from gpu_vecenv.train import evaluate, load_config
    from gpu_vecenv.train.trainer import Trainer

    started = process_start_time()
    imported = time.time()
    mode = args.worker
    iterations = args.max_iterations if mode == "time_to_475" else args.iterations
    total = args.num_steps * args.num_envs * _agents(args) * iterations
    overrides = [f"ppo.num_steps={args.num_steps}", "ppo.update_epochs=4",
                 "ppo.num_minibatches=4", f"ppo.learning_rate={args.learning_rate}",
                 f"trainer.log_interval={1 if mode == 'time_to_475' else 10}",
                 f"trainer.sync_timing={'true' if mode == 'breakdown' else 'false'}",
                 f"trainer.cuda_graphs={args.graphs}",
                 f"trainer.fused_kernels={args.fused}"]
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(None, overrides, env=args.env, num_envs=args.num_envs,
                             env_kwargs=json.loads(args.env_kwargs),
                             total_steps=total, seed=args.seed, device=args.device,
                             backend=args.backend, run_dir=tmp, progress=False,
                             tensorboard=False, eval_episodes=0, checkpoint_interval=0)
        rows: list[dict] = []
        reached: dict = {}

        def callback(row: dict) -> bool:
            rows.append(row)
            if mode == "time_to_475" and row.get("episode_return", 0.0) >= 475.0:
                reached.update(seconds_since_process_start=time.time() - started,
                               seconds_since_training_start=row["time"],
                               global_step=row["global_step"])
                return False
            return True

        trainer = Trainer(config, callback=callback)
        built = time.time()
        steps = trainer.batch  # env steps (agent-steps for Tag) per iteration
        device = trainer.device
        t0 = time.time()
        trainer.run()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        result = {"mode": mode, "env": args.env, "num_envs": args.num_envs,
                  "vector_slots": trainer.num_slots, "num_steps": args.num_steps,
                  "device": str(device), "backend": trainer.env.backend_name,
                  "cuda_graphs": trainer.graphs is not None,
                  "fused_kernels": all(getattr(g.learner, "fused", None) is not None
                                       for g in trainer.groups),
                  "wall_seconds": time.time() - t0,
                  "startup_seconds": {"interpreter_and_imports": imported - started,
                                      "build_trainer": built - imported,
                                      "first_iteration": rows[0]["time"] if rows else None}}
        if device.type == "cuda":
            result["gpu"] = torch.cuda.get_device_name(device)
        if mode == "time_to_475":
            result["reached"] = bool(reached)
            result.update(reached)
            if reached:
                ev = evaluate(config, trainer.groups, 100, device)
                result["eval_mean_return_100_episodes"] = ev["mean_return"]
            return result
        first, last = rows[0], rows[-1]
        span = last["time"] - first["time"]
        result["env_steps_per_second"] = (last["global_step"] - first["global_step"]) / span
        result["iterations_timed"] = last["iteration"] - first["iteration"]
        if mode == "breakdown":
            timed = rows[1:]  # each row holds the times since the previous one
            iters = last["iteration"] - first["iteration"]
            rollout = sum(r["rollout_seconds"] for r in timed) / iters
            update = sum(r["update_seconds"] for r in timed) / iters
            result.update(rollout_seconds_per_iteration=rollout,
                          update_seconds_per_iteration=update,
                          rollout_share=rollout / (rollout + update),
                          rollout_env_steps_per_second=steps / rollout)
        return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="JSON file to write")
    parser.add_argument("--device", default="auto", help="torch device (default: auto)")
    parser.add_argument("--env", default="GPUCartPole-v1", help="env id (default CartPole)")
    parser.add_argument("--env-kwargs", default="{}", help="env parameters as JSON")
    parser.add_argument("--backend", default="auto", choices=["auto", "cuda", "torch"])
    parser.add_argument("--sizes", default="2048,16384", help="env counts, comma-separated")
    parser.add_argument("--num-steps", type=int, default=16, help="roll-out steps per env")
    parser.add_argument("--iterations", type=int, default=200,
                        help="PPO iterations of the throughput and breakdown runs")
    parser.add_argument("--max-iterations", type=int, default=2000,
                        help="give up time-to-475 after this many iterations")
    parser.add_argument("--learning-rate", type=float, default=2.5e-3,
                        help="PPO learning rate (default 2.5e-3)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fused", default="null",
                        help="trainer.fused_kernels settings to measure (comma-separated: "
                             "true, false, null; default null)")
    parser.add_argument("--graphs", default=None,
                        help="trainer.cuda_graphs settings to measure (comma-separated: "
                             "true, false, null); default true,false on a GPU, else null")
    parser.add_argument("--modes", default="time_to_475,throughput,breakdown",
                        help="which measurements (comma-separated)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--num-envs", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        print("RESULT " + json.dumps(worker(args)), flush=True)
        return 0

    if args.graphs is None:
        import torch

        on_gpu = args.device != "cpu" and torch.cuda.is_available()
        args.graphs = "true,false" if on_gpu else "null"
    results = []
    modes = [m for m in args.modes.split(",")
             if m != "time_to_475" or args.env == "GPUCartPole-v1"]
    runs = [(size, fused, graphs, mode) for size in (int(s) for s in args.sizes.split(","))
            for fused in args.fused.split(",") for graphs in args.graphs.split(",")
            for mode in modes]
    for size, fused, graphs, mode in runs:
        cmd = [sys.executable, os.path.abspath(__file__), args.output, "--worker", mode,
               "--graphs", graphs, "--fused", fused, "--num-envs", str(size), "--device",
               args.device, "--backend", args.backend, "--num-steps", str(args.num_steps),
               "--iterations", str(args.iterations), "--max-iterations", str(args.max_iterations),
               "--learning-rate", str(args.learning_rate), "--seed", str(args.seed),
               "--env", args.env, "--env-kwargs", args.env_kwargs]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            result = {"mode": mode, "num_envs": size, "graphs": graphs, "fused": fused,
                      "error": proc.stderr[-2000:]}
        else:
            result = json.loads(lines[-1][len("RESULT "):])
        results.append(result)
        print(_summary(result), flush=True)
    with open(args.output, "w") as f:
        json.dump({"benchmark": f"PPO {args.env}, 4 epochs x 4 minibatches",
                   "results": results}, f, indent=2)
    print(f"wrote {args.output}")
    return 0


def _summary(r: dict) -> str:
    graphs = {True: "graphs", False: "eager"}.get(r.get("cuda_graphs"), r.get("graphs", ""))
    fused = {True: "fused", False: "torch"}.get(r.get("fused_kernels"), r.get("fused", ""))
    head = f"{r.get('env', '')} {r['num_envs']:>6} envs {graphs:<6} {fused:<5} {r['mode']:<12}"
    if "error" in r:
        return f"{head} FAILED: {r['error'].strip().splitlines()[-1] if r['error'] else ''}"
    if r["mode"] == "time_to_475":
        if not r["reached"]:
            return f"{head} return 475 not reached in {r['wall_seconds']:.1f} s"
        start = r["startup_seconds"]
        return (f"{head} return 475 after {r['seconds_since_process_start']:.2f} s from "
                f"process start ({r['seconds_since_training_start']:.2f} s of training, "
                f"{r['global_step']:,} steps); eval {r['eval_mean_return_100_episodes']:.1f}"
                f"; before training: imports {start['interpreter_and_imports']:.2f} s, "
                f"trainer {start['build_trainer']:.2f} s")
    text = f"{head} {r['env_steps_per_second']:>14,.0f} env-steps/s"
    if r["mode"] == "breakdown":
        text += (f"  roll-out {r['rollout_seconds_per_iteration'] * 1e3:.2f} ms/it, update "
                 f"{r['update_seconds_per_iteration'] * 1e3:.2f} ms/it "
                 f"({r['rollout_share']:.0%} roll-out)")
    return text


if __name__ == "__main__":
    sys.exit(main())
