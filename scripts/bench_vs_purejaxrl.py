"""PPO on CartPole-v1, ours against PureJaxRL's in the same call: training env-steps/s and
time to a mean return of 475 from process start; writes JSON and prints a table.

    python scripts/bench_vs_purejaxrl.py out.json [--sizes 2048,16384] [--repeats 5]
    python scripts/bench_vs_purejaxrl.py out.json --sizes 64 --repeats 1 \
        --total-steps 20000 --max-updates 20 --device cpu          # a smoke run on the CPU

On the GPU machine, with gymnax from the device kit's peers (JAX is installed there):

    source .device-kit/setup.sh && source .device-kit/peers/setup.sh
    PYTHONPATH=$PEERS_PATH python3 scripts/bench_vs_purejaxrl.py out.json

Ours: ``gpu_vecenv.train`` on ``GPUCartPole-v1`` (its defaults: CUDA kernels, CUDA graphs,
fused PPO kernels where they apply). PureJaxRL: its ``ppo.py`` on gymnax's ``CartPole-v1``
(``benchmarks/purejaxrl_ppo.py``: vendored, patched for gymnax 1.0's step). Both train the
same PPO (:func:`ppo_settings`): PureJaxRL's CartPole config (4 epochs x 4 minibatches,
Adam 2.5e-4 annealed to 0, gamma 0.99, GAE 0.95, clip 0.2, value clipped, entropy 0.01,
value 0.5, gradient norm 0.5, 64x64 tanh, advantages normalized per minibatch, no
bootstrapping across a time-limit truncation) with ``--num-steps`` steps per env and update
(default 16, as ``scripts/bench_train.py``: PureJaxRL's 128 were chosen for 4 envs; at
thousands of envs they make each update 8x larger and time to 475 8x longer).

Per env count and measurement, ``--repeats`` runs of each side alternate (ours first in
even repeats, PureJaxRL first in odd ones), each in a fresh Python process; the table
shows the medians (the rule for peers whose rate swings) and ours over PureJaxRL. The JSON
(written after every run) holds every run's figures, the settings, the versions and the
upstream commit.

- ``throughput``: ``--total-steps`` env steps of training. Ours: the logged rows' rate, from
  the second row to the last (compile, kernel loading, graph capture and the first
  iterations excluded; so is the first row's own host work, whose first reads load torch's
  kernels for the divergence check: 56-115 ms once per process on an H200). PureJaxRL: its
  whole training is one jitted function; compiled ahead of time, called
  ``--warmup-calls`` times, then one call timed to ``block_until_ready``: env steps /
  seconds. Both are steady-state rates.
- ``--matmul-precision``: ours' ``trainer.matmul_precision`` (default: the trainer's,
  ``highest``: float32-like products; ``high``: one TF32 product, as JAX's default for
  float32 dots on a GPU with TF32 tensor cores). Each PureJaxRL run records how its
  default float32 dot rounds on the device (``default_f32_dot``: ``tf32`` or ``float32``).
- ``time_to_475``: trains up to ``--max-updates`` updates (the learning rate anneals over
  them on both sides) and stops when the mean return of the last 100 or more finished
  episodes reaches 475 (:class:`gpu_vecenv.train.stopping.ReturnWindow`, fed once per
  update on both sides). Seconds from process start (the process's start time from
  ``/proc``, before any import) to that decision. PureJaxRL trains one jitted scan over all
  updates, so it cannot stop in the middle: here it runs ``--chunk-updates`` updates per
  jitted call (default 1: it is checked after every update, as ours is) and each call
  returns the finished episodes' return sums and counts per update; the time counts every
  update of the chunk that reached it. Its compile is part of its time, as a user's first
  run has it (``--jax-cache DIR`` turns on JAX's persistent compilation cache, the
  counterpart of our kernel cache, which is on by default).

PureJaxRL's processes run with JAX's defaults (GPU memory preallocated: the peers kit's
``XLA_PYTHON_CLIENT_PREALLOCATE=false`` is for benchmarks that share a process with torch).
"""

from __future__ import annotations

import time

_PROCESS_T0 = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

SIDES = ("ours", "purejaxrl")
MODES = ("throughput", "time_to_475")
TARGET_RETURN = 475.0
GOAL_RATIO = 2.0
"""Issue 31's goal: ours at least this many times PureJaxRL's rate, and as much faster."""

SCRIPT = Path(__file__).resolve()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (``--sizes`` and ``--modes`` parsed into lists)."""
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("output", help="JSON file to write")
    parser.add_argument("--sizes", default="2048,16384",
                        help="env counts, comma-separated (default 2048,16384)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="runs of each side per size and measurement; the median counts "
                             "(default 5)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="measurements, comma-separated (throughput, time_to_475)")
    parser.add_argument("--num-steps", type=int, default=16,
                        help="roll-out steps per env and update (default 16, as "
                             "scripts/bench_train.py; PureJaxRL's CartPole config has 128 "
                             "for 4 envs)")
    parser.add_argument("--learning-rate", type=float, default=2.5e-4,
                        help="Adam learning rate, annealed to 0 (PureJaxRL's: 2.5e-4)")
    parser.add_argument("--total-steps", type=int, default=50_000_000,
                        help="env steps of each throughput run (default 50M)")
    parser.add_argument("--max-updates", type=int, default=1000,
                        help="time_to_475: give up after this many updates; the learning "
                             "rate anneals over them (default 1000)")
    parser.add_argument("--chunk-updates", type=int, default=1,
                        help="time_to_475: PureJaxRL updates per jitted call (default 1)")
    parser.add_argument("--warmup-calls", type=int, default=1,
                        help="throughput: untimed calls of PureJaxRL's compiled training "
                             "(default 1)")
    parser.add_argument("--jax-cache", default=None,
                        help="directory for JAX's persistent compilation cache (default off)")
    parser.add_argument("--device", default="auto",
                        help="auto (the GPU where there is one) or cpu, for both sides")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--matmul-precision", choices=("highest", "high", "medium"),
                        default=None,
                        help="ours: trainer.matmul_precision (default: the trainer's, "
                             "highest)")
    parser.add_argument("--seed-per-repeat", action="store_true",
                        help="repeat k of each pair trains with seed --seed + k on both sides "
                             "(default: --seed for every run)")
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--num-envs", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes: comma-separated integers, not {args.sizes!r}")
    args.modes = args.modes.split(",")
    unknown = sorted(set(args.modes) - set(MODES))
    if unknown:
        parser.error(f"--modes: unknown {unknown}; choose from {', '.join(MODES)}")
    for name in ("repeats", "num_steps", "total_steps", "max_updates", "chunk_updates"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if min(args.sizes) < 4:  # 4 minibatches of whole envs
        parser.error("--sizes: at least 4 envs")
    if args.device not in ("auto", "cpu"):
        parser.error("--device: auto or cpu (JAX and torch each take the first GPU)")
    return args


def ppo_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The PPO both sides train with, in our config's names (:class:`PPOConfig`)."""
    return {"num_steps": args.num_steps, "learning_rate": args.learning_rate,
            "anneal_lr": True, "update_epochs": 4, "num_minibatches": 4, "gamma": 0.99,
            "gae_lambda": 0.95, "clip_coef": 0.2, "clip_vloss": True, "norm_adv": True,
            "ent_coef": 0.01, "vf_coef": 0.5, "max_grad_norm": 0.5, "hidden_sizes": [64, 64],
            "activation": "tanh", "bootstrap_truncated": False}


PUREJAXRL_KEYS = {"learning_rate": "LR", "update_epochs": "UPDATE_EPOCHS",
                  "num_minibatches": "NUM_MINIBATCHES", "gamma": "GAMMA",
                  "gae_lambda": "GAE_LAMBDA", "clip_coef": "CLIP_EPS", "ent_coef": "ENT_COEF",
                  "vf_coef": "VF_COEF", "max_grad_norm": "MAX_GRAD_NORM",
                  "activation": "ACTIVATION", "anneal_lr": "ANNEAL_LR"}
"""Our names of the settings PureJaxRL's config holds; the rest are fixed in its code
(64x64 layers, value clipping, per-minibatch advantage normalization, no bootstrap)."""


def purejaxrl_overrides(settings: dict[str, Any]) -> dict[str, Any]:
    """:func:`ppo_settings` as PureJaxRL config keys (sizes apart)."""
    return {key: settings[name] for name, key in PUREJAXRL_KEYS.items()}


def plan_runs(sizes: list[int], modes: list[str], repeats: int) -> list[dict[str, Any]]:
    """Every run in order: per size and mode, ``repeats`` pairs, ours first in even repeats
    and PureJaxRL first in odd ones (a drift during the call weighs on both sides alike)."""
    runs = []
    for size in sizes:
        for mode in modes:
            for repeat in range(repeats):
                order = SIDES if repeat % 2 == 0 else SIDES[::-1]
                runs += [{"num_envs": size, "mode": mode, "side": side, "repeat": repeat}
                         for side in order]
    return runs


def run_value(run: dict[str, Any]) -> float | None:
    """A run's figure: env-steps/s (throughput) or seconds from process start to 475;
    None for a failed run or one that never reached 475."""
    if "error" in run:
        return None
    if run["mode"] == "throughput":
        return run["env_steps_per_second"]
    return run["seconds_since_process_start"] if run["reached"] else None


def median_value(values: list[float | None], higher_is_better: bool) -> float | None:
    """The median, a missing value counting as the worst (so most runs must have a value
    for there to be one); None where the median is missing."""
    if not values:
        return None
    worst = -math.inf if higher_is_better else math.inf
    median = statistics.median(worst if v is None else v for v in values)
    return None if math.isinf(median) else median


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per size and mode (in the runs' order): each side's median and its runs' values, and
    ours over PureJaxRL (for time, PureJaxRL's seconds over ours: > 1 means ours is faster)."""
    groups: dict[tuple[int, str], dict[str, list]] = {}
    for run in runs:
        sides = groups.setdefault((run["num_envs"], run["mode"]), {s: [] for s in SIDES})
        sides[run["side"]].append(run_value(run))
    rows = []
    for (size, mode), values in groups.items():
        higher = mode == "throughput"
        ours, peer = (median_value(values[s], higher) for s in SIDES)
        ratio = None
        if ours is not None and peer is not None:
            ratio = ours / peer if higher else peer / ours
        rows.append({"num_envs": size, "mode": mode, "ours": ours, "purejaxrl": peer,
                     "ratio": ratio, "goal_met": None if ratio is None else ratio >= GOAL_RATIO,
                     "values": values})
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """The summary as a text table."""
    def cell(value: float | None, mode: str) -> str:
        if value is None:
            return "-"
        return f"{value:,.0f}" if mode == "throughput" else f"{value:.2f} s"

    header = (f"{'envs':>7}  {'measure':<31}{'ours':>13}{'PureJaxRL':>13}{'ours/PJX':>10}"
              f"  {'goal >= ' + format(GOAL_RATIO, 'g') + 'x':<12}runs with a value")
    lines = [header, "-" * len(header)]
    for row in rows:
        measure = ("training env-steps/s" if row["mode"] == "throughput"
                   else "time to 475 from process start")
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        met = {True: "met", False: "not met", None: "-"}[row["goal_met"]]
        counts = ", ".join(f"{sum(v is not None for v in row['values'][s])}/"
                           f"{len(row['values'][s])}" for s in SIDES)
        lines.append(f"{row['num_envs']:>7,}  {measure:<31}{cell(row['ours'], row['mode']):>13}"
                     f"{cell(row['purejaxrl'], row['mode']):>13}{ratio:>10}  {met:<12}{counts}")
    return "\n".join(lines)


def worker_command(args: argparse.Namespace, run: dict[str, Any]) -> list[str]:
    """The command line of one run's fresh process."""
    cmd = [sys.executable, str(SCRIPT), args.output, "--worker", run["side"], "--mode",
           run["mode"], "--num-envs", str(run["num_envs"]), "--device", args.device,
           "--num-steps", str(args.num_steps), "--learning-rate", repr(args.learning_rate),
           "--total-steps", str(args.total_steps), "--max-updates", str(args.max_updates),
           "--chunk-updates", str(args.chunk_updates), "--warmup-calls",
           str(args.warmup_calls), "--seed", str(run_seed(args, run))]
    if args.matmul_precision is not None:
        cmd += ["--matmul-precision", args.matmul_precision]
    return cmd


def run_seed(args: argparse.Namespace, run: dict[str, Any]) -> int:
    """The training seed of ``run``: ``--seed``, plus its repeat with ``--seed-per-repeat``
    (both sides of a pair train with the same seed)."""
    return args.seed + (run["repeat"] if args.seed_per_repeat else 0)


def worker_environment(args: argparse.Namespace, side: str) -> dict[str, str]:
    """The process environment of a run: for PureJaxRL, JAX's defaults, on the CPU with
    ``--device cpu``, with the compilation cache with ``--jax-cache``."""
    env = dict(os.environ)
    if side == "purejaxrl":
        # Alone in its process, JAX runs as its users run it: memory preallocated (the
        # peers kit turns that off for the benchmarks that share a process with torch).
        env.pop("XLA_PYTHON_CLIENT_PREALLOCATE", None)
        if args.device == "cpu":
            env["JAX_PLATFORMS"] = "cpu"
        if args.jax_cache:
            env["JAX_COMPILATION_CACHE_DIR"] = os.path.abspath(args.jax_cache)
    return env


def run_one(args: argparse.Namespace, run: dict[str, Any]) -> dict[str, Any]:
    """One run in a fresh process: its result, or ``error`` with the end of its stderr."""
    proc = subprocess.run(worker_command(args, run), capture_output=True, text=True,
                          env=worker_environment(args, run["side"]))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return {**run, "error": (proc.stderr or proc.stdout)[-3000:]}
    return {**run, **json.loads(lines[-1][len("RESULT "):])}


def describe(run: dict[str, Any]) -> str:
    """One line per finished run."""
    head = f"{run['num_envs']:>7,} envs {run['mode']:<12} {run['side']:<10} #{run['repeat']}"
    if "error" in run:
        last = run["error"].strip().splitlines()
        return f"{head} FAILED: {last[-1] if last else ''}"
    if run["mode"] == "throughput":
        return f"{head} {run['env_steps_per_second']:>14,.0f} env-steps/s"
    if not run["reached"]:
        return f"{head} 475 not reached in {run['updates']} updates"
    return (f"{head} 475 after {run['seconds_since_process_start']:.2f} s from start, "
            f"{run['updates']} updates, {run['env_steps']:,} steps")


def process_start_time() -> float:
    """When this process started (``scripts/bench_train.py``'s reading of ``/proc``; this
    module's import where it is not run as a script)."""
    if __name__ != "__main__":
        return _PROCESS_T0
    from bench_train import process_start_time as read  # beside this script

    return read()


def ours_worker(args: argparse.Namespace) -> dict[str, Any]:
    """One run of our trainer in this process (``--mode``): its JSON-able result."""
    started = process_start_time()
    import torch

    from gpu_vecenv.train.config_loading import config_from_dict
    from gpu_vecenv.train.stopping import ReturnWindow
    from gpu_vecenv.train.trainer import Trainer

    imported = time.time()
    batch = args.num_envs * args.num_steps
    timing = args.mode == "throughput"
    iterations = max(args.total_steps // batch, 1) if timing else args.max_updates
    log_interval = min(10, max(1, iterations // 4)) if timing else 1
    rows: list[dict[str, Any]] = []
    window = ReturnWindow()
    reached: dict[str, Any] = {}

    def callback(row: dict[str, Any]) -> bool:
        rows.append(row)
        if timing or "episodes" not in row:
            return True
        window.add(row["episode_return"], row["episodes"])
        if window.full() and window.mean() >= TARGET_RETURN:
            reached.update(seconds_since_process_start=time.time() - started,
                           training_seconds=row["time"], updates=row["iteration"],
                           env_steps=row["global_step"])
            return False
        return True

    trainer_settings = {"env": "GPUCartPole-v1", "num_envs": args.num_envs,
                        "total_steps": iterations * batch, "seed": args.seed,
                        "device": "cpu" if args.device == "cpu" else "auto",
                        "log_interval": log_interval, "progress": False,
                        "tensorboard": False, "eval_episodes": 0, "checkpoint_interval": 0}
    if args.matmul_precision is not None:
        trainer_settings["matmul_precision"] = args.matmul_precision
    import tempfile

    with tempfile.TemporaryDirectory() as run_dir:
        config = config_from_dict({"trainer": {**trainer_settings, "run_dir": run_dir},
                                   "ppo": ppo_settings(args)})
        with Trainer(config, callback=callback) as trainer:
            built = time.time()
            trainer.run()
            device = trainer.device
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            result = {"device": torch.cuda.get_device_name(device) if device.type == "cuda"
                      else "cpu", "backend": trainer.env.backend_name,
                      "cuda_graphs": trainer.graphs is not None,
                      "fused_kernels": all(getattr(g.learner, "fused", None) is not None
                                           for g in trainer.groups),
                      "torch": torch.__version__,
                      "matmul_precision": config.trainer.matmul_precision,
                      "startup_seconds": {"interpreter_and_imports": imported - started,
                                          "build_trainer": built - imported}}
    if timing:
        if len(rows) < 3:
            raise RuntimeError(f"{iterations} iterations logged {len(rows)} row(s), "
                               "fewer than 3: raise --total-steps")
        first, last = rows[1], rows[-1]  # the first row's host work loads kernels once
        result.update(env_steps=last["global_step"] - first["global_step"],
                      seconds=last["time"] - first["time"],
                      updates=last["iteration"] - first["iteration"],
                      last_row_mean_return=last.get("episode_return"))
        result["env_steps_per_second"] = result["env_steps"] / result["seconds"]
        return result
    result.update({"reached": bool(reached), "updates": len(rows),
                   "env_steps": len(rows) * batch, **reached})
    return result


def purejaxrl_worker(args: argparse.Namespace) -> dict[str, Any]:
    """One run of PureJaxRL in this process (``--mode``): its JSON-able result."""
    started = process_start_time()
    from gpu_vecenv.bench import load_peer
    from gpu_vecenv.train.stopping import ReturnWindow

    peer = load_peer("purejaxrl_ppo")
    problem = peer.purejaxrl_problem()  # imports JAX, flax, optax and gymnax
    if problem:
        raise RuntimeError(problem)
    import jax

    imported = time.time()
    batch = args.num_envs * args.num_steps
    timing = args.mode == "throughput"
    updates = max(args.total_steps // batch, 1) if timing else args.max_updates
    overrides = purejaxrl_overrides(ppo_settings(args))
    config = peer.cartpole_config(args.num_envs, args.num_steps, updates * batch, **overrides)
    device = jax.devices()[0]
    result = {"device": device.device_kind, "platform": device.platform,
              "jax": jax.__version__, "startup_seconds": {"interpreter_and_imports":
                                                          imported - started}}
    if timing:
        result.update(peer.time_training(config, args.seed, args.warmup_calls))
        result["default_f32_dot"] = default_f32_dot()
        return result
    window = ReturnWindow()
    decided: list[float] = []

    def stop(return_sum: float, episodes: int) -> bool:
        if episodes:
            window.add(return_sum / episodes, episodes)
        if window.full() and window.mean() >= TARGET_RETURN:
            decided.append(time.time())
            return True
        return False

    result.update(peer.train_until(config, stop, args.chunk_updates, args.seed))
    result["chunk_updates"] = args.chunk_updates
    if decided:
        result["seconds_since_process_start"] = decided[0] - started
    return result


def default_f32_dot() -> str:
    """How JAX computes a float32 dot at its default precision on its first device (the
    shape of PureJaxRL's hidden layers): ``tf32`` where the products keep a 10-bit
    mantissa (1 + 2^-12 becomes 1), ``float32`` where they keep 1 + 2^-12, else the
    value."""
    import jax
    import jax.numpy as jnp

    x = jnp.full((256, 64), 1.0 + 2.0 ** -12, dtype=jnp.float32)
    value = float(jax.jit(jnp.dot)(x, jnp.ones((64, 64), jnp.float32))[0, 0])
    if value == 64.0:
        return "tf32"
    if value == 64.0 * (1.0 + 2.0 ** -12):
        return "float32"
    return repr(value)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker = ours_worker if args.worker == "ours" else purejaxrl_worker
        print("RESULT " + json.dumps(worker(args)), flush=True)
        return 0
    from gpu_vecenv.bench import load_peer

    peer = load_peer("purejaxrl_ppo")
    if peer is None:
        print("benchmarks/purejaxrl_ppo.py is missing: run from a source checkout",
              file=sys.stderr)
        return 2
    record = {"benchmark": "PPO CartPole-v1: gpu_vecenv.train vs PureJaxRL (gymnax)",
              "ppo": ppo_settings(args),
              "arguments": {k: v for k, v in vars(args).items()
                            if k not in ("worker", "mode", "num_envs")},
              "purejaxrl_commit": peer.UPSTREAM_COMMIT, "versions": peer.versions(),
              "machine": machine(args.device), "summary": [], "runs": []}
    runs = record["runs"]
    for run in plan_runs(args.sizes, args.modes, args.repeats):
        runs.append(run_one(args, {**run, "seed": run_seed(args, run)}))
        print(describe(runs[-1]), flush=True)
        record["summary"] = summarize(runs)
        # After every run: a call cut short by its time limit keeps what it measured.
        Path(args.output).write_text(json.dumps(record, indent=1))
    print(format_table(record["summary"]))
    print(f"wrote {args.output}")
    return 0 if all("error" not in r for r in runs) else 1


def machine(device: str) -> dict[str, Any]:
    """Python, torch and the GPU this call ran on (each run also names its device)."""
    import torch

    from gpu_vecenv.bench import machine_info

    on_gpu = device != "cpu" and torch.cuda.is_available()
    return machine_info(torch.device("cuda" if on_gpu else "cpu"))


if __name__ == "__main__":
    sys.exit(main())
