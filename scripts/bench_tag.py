"""Throughput of the Tag kernels: env-steps/s (game steps) and agent-steps/s.

Sizes (games x agents) from the Tag issue, WarpDrive's training configuration (episode
length 500, partial observations of K = min(10, agents - 1) others), random actions
drawn on the device beforehand (a pool of 8 batches), copy=False, NEXT_STEP autoreset,
CUDA events around the timed loop, median of 5 runs. Also: the bytes a step must write
(observations, rewards, flags, state); the host time per step() call and the
backend's kernels alone against the measured device-to-device copy
bandwidth.

    python scripts/bench_tag.py [--device cuda] [--backend cuda] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from gpu_vecenv.envs.tag import TagVectorEnv
from gpu_vecenv.envs.tag_grid import TagGridVectorEnv

CASES = [  # (label, env class, games, params)
    ("tag 1x5", TagVectorEnv, 1, dict(num_taggers=1, num_runners=4)),
    ("tag 2000x5", TagVectorEnv, 2000, dict(num_taggers=1, num_runners=4)),
    ("tag 2000x105", TagVectorEnv, 2000, dict(num_taggers=5, num_runners=100)),
    ("tag 200x1000", TagVectorEnv, 200, dict(num_taggers=10, num_runners=990)),
    ("tag 1x16384", TagVectorEnv, 1, dict(num_taggers=16, num_runners=16368)),
    ("grid 1x5", TagGridVectorEnv, 1, {}),
    ("grid 2000x5", TagGridVectorEnv, 2000, {}),
]


def copy_bandwidth(device) -> float:
    """Bytes/s of a large device-to-device copy (read + write counted)."""
    src = torch.empty(1 << 28, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        dst.copy_(src)
    end.record()
    end.synchronize()
    return 2 * src.numel() * 4 * 20 / (start.elapsed_time(end) / 1000)


def bytes_per_step(env) -> int:
    per_slot = env.obs_dim * 4 + 4 + 2  # obs, reward, terminated + truncated
    state = sum(t.element_size() * t.numel() for t in env.buffers.state.values())
    return env.num_envs * per_slot + state


def time_case(cls, games, params, device, backend, steps, repeats=5):
    if cls is TagVectorEnv:
        agents = params["num_taggers"] + params["num_runners"]
        params = dict(params, num_other_agents_observed=min(10, agents - 1))
    env = cls(games, device=device, backend=backend, copy=False, preset="warpdrive_training",
              **params)
    env.reset(seed=0)
    gen = torch.Generator(device=device).manual_seed(0)
    space = env.single_action_space
    if hasattr(space, "nvec"):
        nvec = torch.as_tensor(space.nvec, device=device)
        pool = [(torch.rand((env.num_envs, 2), generator=gen, device=device) * nvec).long()
                for _ in range(8)]
    else:
        pool = [torch.randint(0, 5, (env.num_envs,), generator=gen, device=device)
                for _ in range(8)]
    for k in range(20):
        env.step(pool[k % 8])
    times, host = [], []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        began = time.perf_counter()
        for k in range(steps):
            env.step(pool[k % 8])
        host.append((time.perf_counter() - began) / steps)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000 / steps)
    # The kernels alone: the backend's step, no action conversion or error-flag copy.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for k in range(steps):
        env.backend.step(pool[k % 8], env._outputs)
    end.record()
    end.synchronize()
    backend = start.elapsed_time(end) / 1000 / steps
    env.check_errors()
    return env, statistics.median(times), statistics.median(host), backend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--json", default=None)
    parser.add_argument("--case", default=None,
                        help="run only these cases, comma-separated, e.g. 'tag 1x5,grid 1x5'")
    parser.add_argument("--cprofile", action="store_true", help="cProfile the step() calls")
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.case:
        wanted = args.case.split(",")
        CASES[:] = [c for c in CASES if c[0] in wanted]
    if args.cprofile:
        import cProfile
        import pstats

        for label, cls, games, params in CASES:
            profile = cProfile.Profile()
            profile.enable()
            time_case(cls, games, params, device, args.backend, args.steps, repeats=1)
            profile.disable()
            print(label)
            pstats.Stats(profile).sort_stats("tottime").print_stats(12)
        return
    bandwidth = copy_bandwidth(device)
    print(f"device copy bandwidth: {bandwidth / 1e12:.2f} TB/s")
    print(f"{'case':14s} {'env-steps/s':>14s} {'agent-steps/s':>15s} {'us/step':>9s} "
          f"{'host us':>8s} {'kernels us':>10s} {'MB/step':>9s} {'% of copy bw':>12s}")
    rows = []
    for label, cls, games, params in CASES:
        env, seconds, host, backend = time_case(cls, games, params, device, args.backend,
                                                args.steps)
        moved = bytes_per_step(env)
        row = dict(case=label, games=games, agents=env.num_agents,
                   env_steps_per_s=games / seconds, agent_steps_per_s=env.num_envs / seconds,
                   us_per_step=seconds * 1e6, host_us_per_step=host * 1e6,
                   backend_us_per_step=backend * 1e6, bytes_per_step=moved,
                   fraction_of_copy_bw=moved / seconds / bandwidth)
        rows.append(row)
        print(f"{label:14s} {row['env_steps_per_s']:14,.0f} {row['agent_steps_per_s']:15,.0f} "
              f"{row['us_per_step']:9.1f} {host * 1e6:8.1f} {backend * 1e6:10.1f} "
              f"{moved / 1e6:9.2f} "
              f"{100 * row['fraction_of_copy_bw']:11.1f}%")
        env.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(copy_bandwidth=bandwidth, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
