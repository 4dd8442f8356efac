"""Per-step cost of each adapter against the raw env (CartPole, 4,096 envs by default).

    python scripts/bench_adapters.py results.json                 # GPU if there is one
    python scripts/bench_adapters.py results.json --device cpu --steps 200

For each way of stepping the env it reports microseconds per step, env-steps/s, the bytes
copied between host and device per step, and (on CUDA) the host synchronizations per step,
counted with ``torch.cuda.set_sync_debug_mode("warn")``:

- ``raw_next_step``: ``GpuVectorEnv.step`` with actions drawn on the device (NEXT_STEP);
- ``raw_same_step``: the same in SAME_STEP mode (what the SB3 adapter runs underneath);
- ``raw_disabled``: DISABLED mode, resetting the done envs with a mask after each step
  when any is done (what the TorchRL adapter runs underneath);
- ``sb3``: ``SB3VecEnv.step`` with numpy actions, as SB3 calls it;
- ``torchrl``: ``TorchRLEnv.step_and_maybe_reset`` with device actions, as collectors call it.

Timings are wall clock over ``--steps`` steps after ``--warmup`` steps, with one device
synchronize before and after; the JSON holds everything printed.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings
from collections.abc import Callable

import numpy as np
import torch


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(step: Callable[[], None], device: torch.device, steps: int,
               warmup: int) -> float:
    """Seconds per call of ``step``."""
    for _ in range(warmup):
        step()
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="path of the JSON file to write")
    parser.add_argument("--env-id", default="GPUCartPole-v1")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=1000)
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

    from gpu_vecenv.adapters.sb3 import SB3VecEnv
    from gpu_vecenv.adapters.torchrl import TorchRLEnv

    from gpu_vecenv import make_vec

    results: dict[str, dict] = {}

    def record(name: str, seconds: float, syncs: float | None, h2d: int, d2h: int,
               note: str) -> None:
        results[name] = {"us_per_step": seconds * 1e6, "env_steps_per_s": n / seconds,
                         "syncs_per_step": syncs, "h2d_bytes_per_step": h2d,
                         "d2h_bytes_per_step": d2h, "what": note}
        print(f"{name:>14}: {seconds * 1e6:9.1f} us/step {n / seconds:14,.0f} env-steps/s "
              f"syncs/step={syncs} h2d={h2d} B d2h={d2h} B")

    backend_name = None
    for mode, name in (("NEXT_STEP", "raw_next_step"), ("SAME_STEP", "raw_same_step")):
        env = make_vec(args.env_id, n, device=device, backend=args.backend,
                       autoreset_mode=mode, strict=False)
        backend_name = env.backend_name
        env.reset(seed=0)
        space = env.single_action_space

        def raw_step(env=env, space=space) -> None:
            env.step(torch.randint(int(space.n), (n,), device=device))

        record(name, time_steps(raw_step, device, args.steps, args.warmup),
               count_syncs(raw_step, device), 0, 0,
               f"GpuVectorEnv.step ({mode}), actions drawn on the device")
        env.close()

    env = make_vec(args.env_id, n, device=device, backend=args.backend,
                   autoreset_mode="DISABLED", strict=False)
    env.reset(seed=0)

    def raw_disabled_step() -> None:
        _, _, terminated, truncated, _ = env.step(torch.randint(2, (n,), device=device))
        done = terminated | truncated
        if bool(done.any()):  # one sync, as TorchRL's maybe_reset
            env.reset(options={"reset_mask": done})

    record("raw_disabled", time_steps(raw_disabled_step, device, args.steps, args.warmup),
           count_syncs(raw_disabled_step, device), 0, 0,
           "GpuVectorEnv.step (DISABLED) + reset(options={'reset_mask': done}) when any done")
    env.close()

    venv = SB3VecEnv(args.env_id, num_envs=n, device=device, backend=args.backend,
                     strict=False)
    venv.seed(0)
    venv.reset()
    rng = np.random.default_rng(0)
    host_actions = [rng.integers(0, 2, size=n) for _ in range(16)]
    counter = iter(range(10**9))

    def sb3_step() -> None:
        venv.step(host_actions[next(counter) % 16])

    obs_dim = int(np.prod(venv.observation_space.shape))
    record("sb3", time_steps(sb3_step, device, args.steps, args.warmup),
           count_syncs(sb3_step, device), n * 8, n * (2 * obs_dim + 3) * 4,
           "SB3VecEnv.step: numpy actions in (one H2D copy), one packed D2H copy of obs, "
           "final obs, reward, terminated, truncated, then the info dicts")
    venv.close()

    env = TorchRLEnv(args.env_id, num_envs=n, device=device, backend=args.backend,
                     strict=False)
    env.set_seed(0)
    state = {"td": env.reset()}

    def torchrl_step() -> None:
        td = state["td"]
        td["action"] = torch.randint(2, (n,), device=device)
        _, state["td"] = env.step_and_maybe_reset(td)

    record("torchrl", time_steps(torchrl_step, device, args.steps, args.warmup),
           count_syncs(torchrl_step, device), 0, 0,
           "TorchRLEnv.step_and_maybe_reset with device actions (TorchRL checks any(done) "
           "on the host to decide whether to reset)")
    env.close()

    report = {
        "env_id": args.env_id, "num_envs": n, "steps": args.steps, "warmup": args.warmup,
        "device": str(device), "backend": backend_name,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
        else platform.processor() or platform.machine(),
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "results": results,
    }
    with open(args.output, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
