"""Throughput of the torch backend's ``step()``: CartPole and Pendulum over a range of sizes.

Random valid actions are made on the device beforehand (sampling is not timed); each
point is warmed up, then timed as a loop of ``step()`` calls between two
``torch.cuda.synchronize()``; the median of ``--repeats`` loops is reported.

    python scripts/bench_torch_backend.py --device cuda --json torch_backend_h200.json
    python scripts/bench_torch_backend.py --device cpu --impl old new --compile

``--impl old`` runs the original backend, frozen in
``tests/runtime/frozen_torch_backend.py`` (its Philox and per-field writes; the env
functions are today's), for a before/after in one process. ``--compile`` adds the
``torch_compile=True`` variant of the new backend, ``--graphs`` the ``torch_graphs=True``
one (each step one CUDA graph replay; with ``--compile``, both together too).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))  # for tests.runtime

import gpu_vecenv  # noqa: E402
from gpu_vecenv.entry_points import make_vec  # noqa: E402

ENV_IDS = {"cartpole": "GPUCartPole-v1", "pendulum": "GPUPendulum-v1"}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _make(env_id, n, device, impl, compiled, copy, graphs=False):
    kwargs = {"torch_compile": True} if compiled else {}
    if graphs:
        kwargs["torch_graphs"] = True
    env = make_vec(env_id, n, device=device, backend="torch", copy=copy, **kwargs)
    if impl == "old":
        from tests.runtime.frozen_torch_backend import FrozenTorchBackend

        env.backend = FrozenTorchBackend(env._ctx)
    env.reset(seed=0)
    return env


def _actions(env, count: int, gen: torch.Generator) -> list[torch.Tensor]:
    n, space, device = env.num_envs, env.single_action_space, env.device
    if env.actions.kind == "discrete":
        return [torch.randint(0, int(space.n), (n,), device=device, generator=gen)
                for _ in range(count)]
    low, high = float(space.low.min()), float(space.high.max())
    return [low + (high - low) * torch.rand((n, *space.shape), device=device, generator=gen)
            for _ in range(count)]


def _loop(env, actions, steps: int) -> float:
    _sync(env.device)
    start = time.perf_counter()
    for i in range(steps):
        env.step(actions[i % len(actions)])
    _sync(env.device)
    return time.perf_counter() - start


def measure(env_id, n, device, impl, compiled, copy, args, graphs=False) -> dict:
    env = _make(env_id, n, device, impl, compiled, copy, graphs)
    gen = torch.Generator(device=device).manual_seed(0)
    actions = _actions(env, args.action_batches, gen)
    first_step = _loop(env, actions, 1)  # a compiled step compiles here
    _loop(env, actions, args.warmup)
    probe = _loop(env, actions, 10) / 10
    steps = max(10, min(args.max_steps, int(args.seconds / probe)))
    seconds = [_loop(env, actions, steps) / steps for _ in range(args.repeats)]
    per_step = statistics.median(seconds)
    env.close()
    return {"env": env_id, "num_envs": n, "device": str(device), "impl": impl,
            "compiled": compiled, "graphs": graphs, "copy": copy, "strict": env.strict,
            "steps": steps,
            "repeats": args.repeats, "us_per_step": per_step * 1e6,
            "env_steps_per_s": n / per_step, "us_per_step_all": [s * 1e6 for s in seconds],
            "first_step_s": first_step}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sizes", type=int, nargs="+", help="numbers of envs "
                        "(default: 1 16 1024 65536 1048576 on cuda, 1 16 1024 on cpu)")
    parser.add_argument("--envs", nargs="+", default=list(ENV_IDS), choices=list(ENV_IDS))
    parser.add_argument("--impl", nargs="+", default=["new"], choices=["new", "old"])
    parser.add_argument("--compile", action="store_true", help="also the compiled variant")
    parser.add_argument("--graphs", action="store_true",
                        help="also torch_graphs=True (with --compile: with and without)")
    parser.add_argument("--copy", nargs="+", type=int, default=[0, 1], choices=[0, 1],
                        help="copy= settings to measure (0: copy=False, 1: the default)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5, help="per timed loop")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--max-steps", type=int, default=20000)
    parser.add_argument("--action-batches", type=int, default=16)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    sizes = args.sizes or ([1, 16, 1024, 65536, 1048576] if device.type == "cuda"
                           else [1, 16, 1024])
    variants = [(impl, False, False) for impl in args.impl]
    if args.compile and "new" in args.impl:
        variants.append(("new", True, False))
    if args.graphs and "new" in args.impl and device.type == "cuda":
        variants.append(("new", False, True))
        if args.compile:
            variants.append(("new", True, True))

    print(f"torch {torch.__version__} on {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "")
          + f"; gpu_vecenv from {Path(gpu_vecenv.__file__).parent}")
    print(f"{'env':<16}{'num_envs':>9}  {'impl':<20}{'copy':<6}{'us/step':>10}"
          f"{'env-steps/s':>13}")
    results = []
    for name in args.envs:
        for n in sizes:
            for impl, compiled, graphs in variants:
                for copy in args.copy:
                    r = measure(ENV_IDS[name], n, device, impl, compiled, bool(copy), args,
                                graphs)
                    results.append(r)
                    label = impl + (" compiled" if compiled else "") + (" graphs" if graphs
                                                                        else "")
                    print(f"{name:<16}{n:>9}  {label:<20}{str(bool(copy)):<6}"
                          f"{r['us_per_step']:>10.1f}{r['env_steps_per_s']:>13.3e}"
                          f"  (first step {r['first_step_s']:.2f} s)", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, "device": str(device),
                                         "results": results}, indent=1))


if __name__ == "__main__":
    main()
