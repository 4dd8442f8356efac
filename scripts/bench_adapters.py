"""Per-step cost of each adapter against the raw env (CartPole, 4,096 envs by default).

    python scripts/bench_adapters.py results.json                 # GPU if there is one
    python scripts/bench_adapters.py results.json --device cpu --threads 1

For each way of stepping the env it reports microseconds per step, env-steps/s, the bytes
copied between host and device per step, and (on CUDA) the host synchronizations per step,
counted with ``torch.cuda.set_sync_debug_mode("warn")``:

- ``raw_next_step``: ``GpuVectorEnv.step`` with actions drawn on the device (NEXT_STEP);
- ``raw_same_step``: the same in SAME_STEP mode (what the SB3 adapter runs underneath);
- ``raw_disabled``: DISABLED mode, resetting the done envs with a mask after each step
  when any is done (what the TorchRL adapter runs underneath);
- ``sb3``: ``SB3VecEnv.step`` with numpy actions, as SB3 calls it;
- ``torchrl``: ``TorchRLEnv.step_and_maybe_reset`` with device actions, as collectors call it.

The paths are timed in interleaved rounds (each round times every path for
``steps / rounds`` steps, with a device synchronize before and after) and each path's median
round is reported, so load that drifts during the run affects all paths alike. The JSON
holds everything printed.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings
from collections.abc import Callable

import numpy as np
import torch


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(step: Callable[[], None], device: torch.device, steps: int) -> float:
    """Seconds per call of ``step`` over ``steps`` calls."""
    _sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    return (time.perf_counter() - start) / steps


def count_syncs(step: Callable[[], None], device: torch.device, calls: int = 10) -> float | None:
    """Host synchronizations per call of ``step`` (CUDA only; ``None`` elsewhere)."""
    if device.type != "cuda":
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(calls):
                step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    return len(syncs) / calls


def build_paths(args: argparse.Namespace, device: torch.device) -> dict[str, dict]:
    """Every stepping path: its step function, bytes moved per step and description."""
    from gpu_vecenv import make_vec
    from gpu_vecenv.adapters.sb3 import SB3VecEnv

    n = args.num_envs
    common = {"device": device, "backend": args.backend, "strict": False}
    paths: dict[str, dict] = {}

    for mode in ("NEXT_STEP", "SAME_STEP"):
        env = make_vec(args.env_id, n, autoreset_mode=mode, **common)
        env.reset(seed=0)

        def raw_step(env=env) -> None:
            env.step(torch.randint(2, (n,), device=device))

        paths[f"raw_{mode.lower()}"] = dict(
            step=raw_step, env=env, h2d=0, d2h=0,
            what=f"GpuVectorEnv.step ({mode}), actions drawn on the device")

    disabled = make_vec(args.env_id, n, autoreset_mode="DISABLED", **common)
    disabled.reset(seed=0)

    def raw_disabled_step() -> None:
        _, _, terminated, truncated, _ = disabled.step(torch.randint(2, (n,), device=device))
        done = terminated | truncated
        if bool(done.any()):  # one sync, as TorchRL's maybe_reset
            disabled.reset(options={"reset_mask": done})

    paths["raw_disabled"] = dict(
        step=raw_disabled_step, env=disabled, h2d=0, d2h=0,
        what="GpuVectorEnv.step (DISABLED) + reset(options={'reset_mask': done}) if any done")

    venv = SB3VecEnv(args.env_id, num_envs=n, **common)
    venv.seed(0)
    venv.reset()
    rng = np.random.default_rng(0)
    host_actions = [rng.integers(0, 2, size=n) for _ in range(16)]
    counter = iter(range(2**62))

    def sb3_step() -> None:
        venv.step(host_actions[next(counter) % 16])

    obs_dim = int(np.prod(venv.observation_space.shape))
    paths["sb3"] = dict(
        step=sb3_step, env=venv, h2d=n * 8, d2h=n * (2 * obs_dim + 3) * 4,
        what="SB3VecEnv.step: numpy actions in (one H2D copy), one packed D2H copy of obs, "
             "final obs, reward, terminated, truncated, then the info dicts")

    try:
        from gpu_vecenv.adapters.torchrl import TorchRLEnv
    except ImportError as error:  # measure the rest where TorchRL is not installed
        print(f"skipping the TorchRL path: {error}")
        return paths
    rl_env = TorchRLEnv(args.env_id, num_envs=n, **common)
    rl_env.set_seed(0)
    holder = {"td": rl_env.reset()}

    def torchrl_step() -> None:
        td = holder["td"]
        td["action"] = torch.randint(2, (n,), device=device)
        _, holder["td"] = rl_env.step_and_maybe_reset(td)

    paths["torchrl"] = dict(
        step=torchrl_step, env=rl_env, h2d=0, d2h=0,
        what="TorchRLEnv.step_and_maybe_reset with device actions (TorchRL reads any(done) "
             "on the host to decide whether to reset)")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="path of the JSON file to write")
    parser.add_argument("--env-id", default="GPUCartPole-v1", help="a Discrete(2) env")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=1000, help="timed steps per path")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's own choice)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    n = args.num_envs

    paths = build_paths(args, device)
    for path in paths.values():
        for _ in range(args.warmup):
            path["step"]()
    per_round = max(1, args.steps // args.rounds)
    rounds: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(args.rounds):
        for name, path in paths.items():
            rounds[name].append(time_steps(path["step"], device, per_round))

    results: dict[str, dict] = {}
    for name, path in paths.items():
        seconds = statistics.median(rounds[name])
        syncs = count_syncs(path["step"], device)
        results[name] = {
            "us_per_step": seconds * 1e6, "env_steps_per_s": n / seconds,
            "us_per_step_rounds": [s * 1e6 for s in rounds[name]],
            "syncs_per_step": syncs, "h2d_bytes_per_step": path["h2d"],
            "d2h_bytes_per_step": path["d2h"], "what": path["what"],
        }
        print(f"{name:>14}: {seconds * 1e6:9.1f} us/step {n / seconds:14,.0f} env-steps/s "
              f"syncs/step={syncs} h2d={path['h2d']} B d2h={path['d2h']} B")
    backend = paths["raw_next_step"]["env"].backend_name
    for path in paths.values():
        path["env"].close()

    report = {
        "env_id": args.env_id, "num_envs": n, "steps": per_round * args.rounds,
        "rounds": args.rounds, "warmup": args.warmup, "device": str(device),
        "backend": backend,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
        else platform.processor() or platform.machine(),
        "torch": torch.__version__, "threads": torch.get_num_threads(), "results": results,
    }
    with open(args.output, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
