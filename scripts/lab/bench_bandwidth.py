"""Bandwidth of the single-agent step kernels per thread mapping: E envs per thread.

For each env and size, and each variant ``E[:M]`` (``GPU_VECENV_ENVS_PER_THREAD=E``, and
``GPU_VECENV_STEP_MIN_BLOCKS=M`` where given; see :mod:`gpu_vecenv.backends.cuda`), an env
is made with ``copy=False``, reset with seed 0 and timed two ways, each the median of
``--repeats`` runs of ``--steps`` steps between CUDA events (after one warm-up run; the
variants take turns run by run), over a pool of 8 pre-drawn random action batches:

- ``step``: ``env.step()`` (what a user's loop pays);
- ``kernel``: ``env.backend.step()`` into the env's outputs (the launch alone, no Python
  wrapper around it: at 1M envs the wrapper can be the longer of the two).

The variables are read when a backend is made and compiled into its kernels as ``-D``
flags (part of the kernel cache key), so one process builds and holds every variant: this
script sets them in ``os.environ`` just before each ``make_vec``.

Rates are env-steps/s and the percentage of the device copy bandwidth (a 1 GiB
device-to-device copy, as ``gpu-vecenv bench``) that ``bytes_per_env_step`` bytes per
env-step amount to.

Then the check: each variant against E = 1, both stepped with the same 50 random action
batches (1 % invalid actions, ``strict=False``), must write bit-identical obs, reward,
terminated, truncated (and final_obs) at every step and hold bit-identical state, elapsed
steps, RNG counters, pending and invalid flags at the end; in NEXT_STEP at the timed sizes,
and in
all three autoreset modes at sizes that take the kernels' other paths: 1 env (the one-env
tail alone), 4099 and 4,194,307 (state rows not aligned to E floats, so E > 1 reads them
value by value, and a tail of n % E envs one at a time).

    python scripts/lab/bench_bandwidth.py out.json [--envs ...] [--sizes 4194304,1048576]
        [--variants 1 2 4 4:4]

With ``--variants 1`` it also times a gpu_vecenv from before these settings (installed in
place of this one): the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from gpu_vecenv.backends import cuda as cuda_backend
from gpu_vecenv.bench import _action_pool, bytes_per_env_step, copy_bandwidth, machine_info
from gpu_vecenv.entry_points import make_vec

ENVS = ["GPUCartPole-v1", "GPUPendulum-v1", "GPUAcrobot-v1", "GPUMountainCar-v0",
        "GPUMountainCarContinuous-v0"]
POOL = 8
CHECK_SIZES = (1, 4099, 4_194_307)
MODES = ("next_step", "same_step", "disabled")
VARIABLES = ("GPU_VECENV_ENVS_PER_THREAD", "GPU_VECENV_STEP_MIN_BLOCKS")


def _parse_variant(text: str) -> tuple[int, int | None]:
    per_thread, _, min_blocks = text.partition(":")
    return int(per_thread), (int(min_blocks) if min_blocks else None)


def _name(variant: tuple[int, int | None]) -> str:
    return f"E={variant[0]}" + (f",minblocks={variant[1]}" if variant[1] else "")


def make(env_id: str, n: int, variant: tuple[int, int | None], **kwargs):
    """``make_vec`` with the variant's variables set while its backend is built."""
    per_thread, min_blocks = variant
    saved = {k: os.environ.get(k) for k in VARIABLES}
    os.environ["GPU_VECENV_ENVS_PER_THREAD"] = str(per_thread)
    if min_blocks:
        os.environ["GPU_VECENV_STEP_MIN_BLOCKS"] = str(min_blocks)
    else:
        os.environ.pop("GPU_VECENV_STEP_MIN_BLOCKS", None)
    # The variants are of <name>_step; at small sizes the backend would take
    # <name>_step_small (one env per thread), so that choice is switched off here.
    small_max = getattr(cuda_backend, "SMALL_STEP_MAX_ENVS", None)
    if small_max is not None:
        cuda_backend.SMALL_STEP_MAX_ENVS = 0
    try:
        env = make_vec(env_id, n, device="cuda", backend="cuda", copy=False, **kwargs)
    finally:
        if small_max is not None:
            cuda_backend.SMALL_STEP_MAX_ENVS = small_max
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    # (a gpu_vecenv from before the setting existed has one env per thread, and no attribute)
    built = getattr(env.backend, "envs_per_thread", 1)
    assert built == per_thread, f"asked for {per_thread} envs per thread, got {built}"
    return env


def _time_once(fn, steps: int) -> float:
    """Seconds per call of ``fn(i)`` over ``steps`` calls, between two CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(steps):
        fn(i)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / steps


def time_variants(env_id: str, n: int, variants, steps: int, repeats: int,
                  bandwidth: float) -> list[dict]:
    """One record per variant; the variants' envs all live at once and take turns, repeat by
    repeat, so that clock and temperature drift falls on all of them alike."""
    runs = []
    for variant in variants:
        env = make(env_id, n, variant)
        env.reset(seed=0)
        actions = _action_pool(env, POOL)
        backend, outputs = env.backend, env._outputs
        loops = {"step": lambda i, env=env, a=actions: env.step(a[i % POOL]),
                 "kernel": lambda i, b=backend, a=actions, o=outputs: b.step(a[i % POOL], o)}
        runs.append((variant, env, loops, {label: [] for label in loops}))
    for _ in range(repeats + 1):  # the first round warms up
        for _variant, _env, loops, times in runs:
            for label, fn in loops.items():
                times[label].append(_time_once(fn, steps))
    records = []
    for variant, env, _loops, times in runs:
        per_env = bytes_per_env_step(env)
        record = {"env": env_id, "num_envs": n, "variant": _name(variant),
                  "envs_per_thread": variant[0], "min_blocks": variant[1],
                  "bytes_per_env_step": per_env}
        for label, values in times.items():
            seconds = statistics.median(values[1:])
            record[f"{label}_us"] = seconds * 1e6
            record[f"{label}_env_steps_per_s"] = n / seconds
            record[f"{label}_pct_copy_bw"] = 100 * per_env * n / seconds / bandwidth
            record[f"{label}_spread"] = (max(values[1:]) - min(values[1:])) / seconds
        env.check_errors()
        env.close()
        records.append(record)
    return records


def _random_actions(env, generator, invalid_fraction: float = 0.01) -> torch.Tensor:
    (action,) = _action_pool(env, 1, seed=int(torch.randint(0, 2**31, (1,),
                                                          generator=generator)))
    bad = torch.rand(env.num_envs, device=env.device) < invalid_fraction
    if action.dtype == torch.int64:
        return torch.where(bad, torch.full_like(action, -1), action)
    return torch.where(bad.view(-1, *([1] * (action.dim() - 1))),
                       torch.full_like(action, float("nan")), action)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def check_variant(env_id: str, n: int, variant, mode: str, steps: int) -> str | None:
    """None if ``variant`` stepped like E = 1 bit for bit, else what differed first."""
    kwargs = {"autoreset_mode": mode, "strict": False}
    one, other = make(env_id, n, (1, None), **kwargs), make(env_id, n, variant, **kwargs)
    one.reset(seed=123)
    other.reset(seed=123)
    generator = torch.Generator().manual_seed(n)
    problem = None
    names = ["obs", "reward", "terminated", "truncated"]
    if mode == "same_step":
        names.append("final_obs")
    for t in range(steps):
        action = _random_actions(one, generator)
        # The backends directly: step() would raise on the invalid actions' deferred error.
        one.backend.step(action, one._outputs)
        other.backend.step(action, other._outputs)
        for name in names:
            x, y = getattr(one._outputs, name), getattr(other._outputs, name)
            if not torch.equal(_bits(x), _bits(y)):
                problem = f"step {t}: {name}"
                break
        if problem:
            break
    if problem is None:
        b1, b2 = one.buffers, other.buffers
        for name in ("elapsed", "rng_counter", "autoreset_pending", "invalid_action",
                     "error_count"):
            if not torch.equal(getattr(b1, name), getattr(b2, name)):
                problem = f"end: {name}"
        for name in b1.state:
            if not torch.equal(_bits(b1.state[name]), _bits(b2.state[name])):
                problem = f"end: state {name}"
    one.close()
    other.close()
    return problem


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", help="where to write the results")
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument("--sizes", type=lambda s: [int(float(x)) for x in s.split(",")],
                        default=[4_194_304, 1_048_576])
    parser.add_argument("--variants", nargs="+", default=["1", "2", "4", "4:4"],
                        help="E or E:M (E envs per thread, M min blocks per SM)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--check-steps", type=int, default=50)
    args = parser.parse_args()
    variants = [_parse_variant(v) for v in args.variants]
    begin = time.perf_counter()

    import gpu_vecenv

    info = machine_info(torch.device("cuda"))
    info["gpu_vecenv"] = os.path.dirname(gpu_vecenv.__file__)
    bandwidth = copy_bandwidth("cuda")
    info["copy_bandwidth_bytes_per_s"] = bandwidth
    print(f"{info['gpu']}: copy bandwidth {bandwidth / 1e12:.2f} TB/s; "
          f"{info['kernel_compiler']}", flush=True)
    print(f"{'env':28s} {'num_envs':>9s} {'variant':16s} {'B/env':>5s} "
          f"{'step us':>8s} {'%bw':>5s} {'kernel us':>9s} {'%bw':>5s}", flush=True)
    records = []
    for env_id in args.envs:
        for n in args.sizes:
            for r in time_variants(env_id, n, variants, args.steps, args.repeats, bandwidth):
                records.append(r)
                print(f"{env_id:28s} {n:>9d} {r['variant']:16s} {r['bytes_per_env_step']:>5d} "
                      f"{r['step_us']:>8.1f} {r['step_pct_copy_bw']:>4.0f}% "
                      f"{r['kernel_us']:>9.1f} {r['kernel_pct_copy_bw']:>4.0f}%", flush=True)
    checks = []
    for env_id in args.envs:
        cases = [(n, "next_step") for n in args.sizes]
        cases += [(n, mode) for n in CHECK_SIZES for mode in MODES]
        for n, mode in cases:
            for variant in variants:
                if variant == (1, None):
                    continue
                problem = check_variant(env_id, n, variant, mode, args.check_steps)
                checks.append({"env": env_id, "num_envs": n, "mode": mode,
                               "variant": _name(variant), "problem": problem})
                if problem:
                    print(f"MISMATCH {env_id} n={n} {mode} {_name(variant)}: {problem}",
                          flush=True)
    bad = [c for c in checks if c["problem"]]
    print(f"bitwise checks against E=1: {len(checks) - len(bad)}/{len(checks)} identical; "
          f"{time.perf_counter() - begin:.0f} s in all", flush=True)
    with open(args.json, "w") as f:
        json.dump({"machine": info, "records": records, "checks": checks}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
