"""``gpu-vecenv bench``: env-steps/s over a range of env counts, per env and backend.

Each point: an env made with ``copy=False`` (outputs overwritten in place), reset with a
fixed seed, a pool of random action batches generated on the env's device beforehand (so
the timed loop is ``step()`` alone, and large batches rotate through more memory than the
L2 cache holds), a warm-up, then the median of ``--repeats`` timed runs (CUDA events around
the loop on a GPU, ``perf_counter`` on the CPU). Also reported: GPU memory per env (the
env's persistent tensors), and for the CUDA kernels the bytes a step must move against the
device copy bandwidth measured on the spot. ``--vs gymnasium`` adds Gymnasium's own numpy
vector env (``CartPoleVectorEnv`` for CartPole, ``SyncVectorEnv`` otherwise) on the CPU.
``--vs gymnax`` (where JAX and gymnax import) times gymnax's ``jit(lax.scan(vmap(step)))``
of the same env and sizes in the same process (``--gymnax-steps`` steps per compiled call,
random actions drawn inside the scan; ``benchmarks/gymnax_peer.py`` of a source checkout),
keeping only the env state or also the trajectory, and prints our ``step()`` loop's rate over
each.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

GPU_SIZES = (1, 1024, 16_384, 262_144, 1_048_576, 4_194_304)
CPU_SIZES = (1, 1024, 16_384)
ACTION_POOL = 8
TARGET_SECONDS = 0.2
"""Each timed repeat runs about this long (at least 10 steps)."""


def _json_dict(text: str) -> dict:
    import json

    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"--env-kwargs must be a JSON object, got {text!r}")
    return value


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", nargs="+", default=["GPUCartPole-v1"],
                        help="env ids, or 'all' (default GPUCartPole-v1)")
    parser.add_argument("--sizes", type=lambda s: [int(float(x)) for x in s.split(",")],
                        default=None, help="comma-separated env counts (default 1,1024,16384,"
                        "262144,1048576,4194304 on a GPU; 1,1024,16384 on the CPU)")
    parser.add_argument("--backend", nargs="+", choices=["cuda", "torch"], default=None,
                        help="backends to time (default: cuda and torch on a GPU, torch on CPU)")
    parser.add_argument("--device", default=None, help="torch device (default: cuda if any)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per point (median)")
    parser.add_argument("--autoreset-mode", default="next_step",
                        help="next_step (default), same_step or disabled")
    parser.add_argument("--vs", choices=["gymnasium", "gymnax"], default=None,
                        help="also time Gymnasium's numpy vector env, or gymnax's jitted scan "
                             "(same process; prints the ratios)")
    parser.add_argument("--gymnax-steps", type=int, default=128,
                        help="steps per compiled gymnax call for --vs gymnax (default 128)")
    parser.add_argument("--gym-max-envs", type=int, default=16_384,
                        help="largest size timed for --vs gymnasium (default 16384)")
    parser.add_argument("--env-kwargs", type=_json_dict, default={}, metavar="JSON",
                        help='env parameters as a JSON object, e.g. '
                             '\'{"preset": "warpdrive_training", "num_runners": 100}\'')
    parser.add_argument("--json", default=None, metavar="PATH", help="write results as JSON")
    parser.add_argument("--plot", default=None, metavar="PATH", help="write a log-log PNG")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="cProfile this many 1-env step() calls per env and backend")


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _action_pool(env, count: int, seed: int = 0) -> list:
    import torch

    from gpu_vecenv.cli import _action_sampler

    generator = torch.Generator(device=env.device).manual_seed(seed)
    sample = _action_sampler(env, generator)
    return [sample() for _ in range(count)]


def _time_loop(env, actions: list, steps: int) -> float:
    """Seconds for ``steps`` calls of ``env.step`` (device time, measured with events)."""
    import torch

    device = env.device
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(steps):
            env.step(actions[i % len(actions)])
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    begin = time.perf_counter()
    for i in range(steps):
        env.step(actions[i % len(actions)])
    return time.perf_counter() - begin


def bytes_per_env_step(env) -> int:
    """Bytes a fused CUDA step must move per env in the steady state (NEXT_STEP, no reset):
    state and elapsed read and written, pending flag and action read, obs, reward,
    terminated, truncated and invalid flag written."""
    import numpy as np

    action = env.actions.dtype.itemsize * int(np.prod(env.single_action_space.shape or (1,)))
    per_slot = 4 * env.obs_dim + 4 + 3
    if hasattr(env, "num_agents"):  # multi-agent: an env-step is a game step
        agent_state = sum(f.dtype.itemsize for f in env.definition.agent_fields)
        return env.num_agents * (2 * agent_state + action + per_slot)
    state = 4 * len(env.definition.state_fields)
    return 2 * state + 2 * 4 + 1 + action + per_slot


def copy_bandwidth(device) -> float:
    """Device-to-device copy bandwidth in bytes/s (bytes read plus bytes written)."""
    import torch

    src = torch.rand(2**28, device=device)  # 1 GiB
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * 2**30 / statistics.median(times)


def bench_point(env_id: str, backend: str, n: int, device, args) -> dict[str, Any]:
    """Time one (env, backend, num_envs) point."""
    import torch

    from gpu_vecenv.entry_points import make_vec

    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    env = make_vec(env_id, n, device=device, backend=backend, copy=False,
                   autoreset_mode=args.autoreset_mode, **args.env_kwargs)
    env.reset(seed=0)
    _sync(device)
    persistent = torch.cuda.memory_allocated(device) - base if device.type == "cuda" else None
    actions = _action_pool(env, ACTION_POOL)
    for i in range(10):
        env.step(actions[i % ACTION_POOL])
    probe = max(_time_loop(env, actions, 10), 1e-7)
    steps = int(min(max(TARGET_SECONDS / (probe / 10), 10), 20_000))
    _time_loop(env, actions, steps // 5 + 1)  # warm-up at the timed length
    times = [_time_loop(env, actions, steps) for _ in range(args.repeats)]
    env.check_errors()
    seconds = statistics.median(times) / steps
    record = {
        "env": env_id, "backend": backend, "num_envs": n, "device": str(device),
        "steps_per_repeat": steps, "repeats": args.repeats,
        "seconds_per_step": seconds, "env_steps_per_s": n / seconds,
        "step_calls_per_s": 1 / seconds,
        # one per agent slot (equal to env_steps_per_s for single-agent envs)
        "agent_steps_per_s": env.num_envs / seconds,
        "spread": (max(times) - min(times)) / statistics.median(times),
        "gpu_bytes_per_env": None if persistent is None else persistent / n,
    }
    if device.type == "cuda":
        record["peak_gpu_bytes"] = torch.cuda.max_memory_allocated(device) - base
    if backend == "cuda":
        record["bytes_per_env_step"] = bytes_per_env_step(env)
    env.close()
    del env, actions
    return record


def bench_gymnasium(env_id: str, n: int, args) -> dict[str, Any] | None:
    """Gymnasium's numpy vector env of the same task (``GPUCartPole-v1`` → ``CartPole-v1``)."""
    import gymnasium as gym
    import numpy as np

    gym_id = env_id.removeprefix("GPU")
    mode = "vector_entry_point" if gym_id == "CartPole-v1" else "sync"
    env = gym.make_vec(gym_id, num_envs=n, vectorization_mode=mode)
    env.reset(seed=0)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(ACTION_POOL)]
    for i in range(10):
        env.step(actions[i % ACTION_POOL])
    begin = time.perf_counter()
    for i in range(10):
        env.step(actions[i % ACTION_POOL])
    probe = time.perf_counter() - begin
    steps = int(min(max(TARGET_SECONDS / (probe / 10), 10), 20_000))
    times = []
    for _ in range(args.repeats):
        begin = time.perf_counter()
        for i in range(steps):
            env.step(actions[i % ACTION_POOL])
        times.append(time.perf_counter() - begin)
    env.close()
    seconds = statistics.median(times) / steps
    return {"env": env_id, "backend": f"gymnasium-{mode}", "num_envs": n, "device": "cpu",
            "steps_per_repeat": steps, "repeats": args.repeats, "seconds_per_step": seconds,
            "env_steps_per_s": n / seconds, "step_calls_per_s": 1 / seconds,
            "spread": (max(times) - min(times)) / statistics.median(times),
            "gpu_bytes_per_env": None, "numpy": np.__version__}


PEERS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
"""Where a source checkout keeps the code that times other libraries beside ours (gymnax,
WarpDrive): benchmark tools, not part of the installed package."""


def load_peer(name: str) -> ModuleType | None:
    """``benchmarks/<name>.py`` of the source checkout this package runs from (an editable
    install), as the module ``benchmarks.<name>``; None where there is none (a wheel).

    Loaded from its file, so the checkout is not put on ``sys.path`` (where its folders
    would shadow another tree's ``gpu_vecenv`` in before/after comparisons)."""
    module_name = f"benchmarks.{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = PEERS_DIR / f"{name}.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # as an import does, before running it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def bench_vs_gymnax(env_id: str, sizes, ours: list[dict[str, Any]], args
                    ) -> list[dict[str, Any]]:
    """gymnax's scan of ``env_id`` at ``sizes``, each printed with the ratio of our
    ``step()`` loop (the records in ``ours`` of this env, per backend) over it."""
    gymnax_peer = load_peer("gymnax_peer")
    if gymnax_peer is None:
        problem = (f"its timing code ({PEERS_DIR / 'gymnax_peer.py'}) comes with a source "
                   "checkout of gpu_vecenv, not with an installed package")
    elif env_id not in gymnax_peer.GYMNAX_IDS:
        problem = f"gymnax has no {env_id}"
    else:
        problem = gymnax_peer.gymnax_problem()
    if problem:
        print(f"{env_id}: gymnax not timed: {problem}")
        return []
    records = []
    for n in sizes:
        # carry only (the scan keeps just the env state), and with the trajectory (obs,
        # action, reward, flags per step: what a training roll-out keeps, and what our
        # step() writes)
        for trajectory in (False, True):
            try:
                peer = gymnax_peer.time_rollout(env_id, n, args.gymnax_steps,
                                                TARGET_SECONDS, args.repeats, trajectory)
            except Exception as exc:  # noqa: BLE001 (JAX's own errors: out of memory, ...)
                print(f"{env_id} gymnax {n}: failed: {str(exc).splitlines()[0]}")
                continue
            records.append(peer)
            ratios = ", ".join(
                f"{r['backend']} {r['env_steps_per_s'] / peer['env_steps_per_s']:.2f}x"
                for r in ours if r.get("env") == env_id and r["num_envs"] == n
                and "env_steps_per_s" in r
                and not r["backend"].startswith(("gymnax", "gymnasium")))
            print(f"{env_id:28s} {peer['name']:26s} {n:>9d} "
                  f"{_fmt(peer['env_steps_per_s']):>12s}   ours / gymnax: {ratios or '-'}")
    return records


def profile_steps(env_id: str, backend: str, device, steps: int) -> str:
    """cProfile of ``steps`` one-env ``step()`` calls: where the per-call time goes."""
    import cProfile
    import io
    import pstats

    from gpu_vecenv.entry_points import make_vec

    env = make_vec(env_id, 1, device=device, backend=backend, copy=False)
    env.reset(seed=0)
    actions = _action_pool(env, ACTION_POOL)
    for i in range(100):
        env.step(actions[i % ACTION_POOL])
    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(steps):
        env.step(actions[i % ACTION_POOL])
    _sync(device)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
    return text.getvalue()


def _fmt(value: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def print_header() -> None:
    print(f"{'env':28s} {'backend':26s} {'num_envs':>9s} {'env-steps/s':>12s} "
          f"{'step()/s':>10s} {'us/step':>9s} {'B/env':>6s} {'%copyBW':>8s}", flush=True)


def print_row(r: dict[str, Any], bandwidth: float | None) -> None:
    mem = "" if r.get("gpu_bytes_per_env") is None else f"{r['gpu_bytes_per_env']:.0f}"
    frac = ""
    if bandwidth and r.get("bytes_per_env_step"):
        frac = f"{100 * r['bytes_per_env_step'] * r['env_steps_per_s'] / bandwidth:.0f}%"
    print(f"{r['env']:28s} {r['backend']:26s} {r['num_envs']:>9d} "
          f"{_fmt(r['env_steps_per_s']):>12s} {_fmt(r['step_calls_per_s']):>10s} "
          f"{r['seconds_per_step'] * 1e6:>9.1f} {mem:>6s} {frac:>8s}", flush=True)


def plot(records: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    keys = sorted({(r["env"], r["backend"]) for r in records})
    for env_id, backend in keys:
        points = sorted((r["num_envs"], r["env_steps_per_s"]) for r in records
                        if r["env"] == env_id and r["backend"] == backend)
        ax.plot(*zip(*points, strict=True), marker="o", label=f"{env_id} ({backend})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("num_envs")
    ax.set_ylabel("env-steps/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def machine_info(device) -> dict[str, Any]:
    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__,
            "platform": platform.platform(), "command": " ".join(sys.argv)}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        try:
            from gpu_vecenv.backends.compiler import KernelsUnavailable, choose_compiler

            info["kernel_compiler"] = choose_compiler().describe()
        except (KernelsUnavailable, ValueError) as exc:
            info["kernel_compiler"] = f"none ({exc})"
    return info


def main(args: argparse.Namespace) -> int:
    import torch

    from gpu_vecenv.backends import cuda_backend_problem
    from gpu_vecenv.devices import usable_device
    from gpu_vecenv.env_ids import get_entry, is_single_agent, list_ids, load_definition

    device = usable_device(args.device or None)
    if args.env == ["all"]:
        env_ids = [e for e in list_ids() if is_single_agent(load_definition(e))]
    else:
        env_ids = args.env
    for env_id in env_ids:
        get_entry(env_id)
    sizes = args.sizes or (GPU_SIZES if device.type == "cuda" else CPU_SIZES)
    if args.backend:
        backends = args.backend
    else:
        backends = ["cuda", "torch"] if cuda_backend_problem(device) is None else ["torch"]
    info = machine_info(device)
    bandwidth = copy_bandwidth(device) if device.type == "cuda" else None
    if bandwidth:
        info["copy_bandwidth_bytes_per_s"] = bandwidth
        print(f"{info['gpu']}: device copy bandwidth {bandwidth / 1e12:.2f} TB/s")
    records, failures = [], []
    print_header()
    for env_id in env_ids:
        for backend in backends:
            for n in sizes:
                try:
                    records.append(bench_point(env_id, backend, n, device, args))
                except (RuntimeError, MemoryError) as exc:  # e.g. out of memory: go on
                    failures.append({"env": env_id, "backend": backend, "num_envs": n,
                                     "error": str(exc).splitlines()[0]})
                    print(f"{env_id} {backend} {n}: failed: {failures[-1]['error']}")
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                    continue
                print_row(records[-1], bandwidth)
            if args.profile:
                print(profile_steps(env_id, backend, device, args.profile))
        if args.vs == "gymnasium":
            for n in sizes:
                if n <= args.gym_max_envs:
                    records.append(bench_gymnasium(env_id, n, args))
                    print_row(records[-1], bandwidth)
        if args.vs == "gymnax":
            records += bench_vs_gymnax(env_id, sizes, records, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "results": records, "failures": failures}, f, indent=1)
    if args.plot and records:
        plot(records, args.plot)
    return 1 if failures else 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m gpu_vecenv.bench",
                                      description=__doc__.splitlines()[0])
    configure_parser(_parser)
    sys.exit(main(_parser.parse_args()))
