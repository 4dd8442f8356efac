"""Captured random-policy roll-outs: CartPole env-steps/s through ``gpu_vecenv.capture_rollout``,
and with ``--vs gymnax`` gymnax's ``jit(lax.scan(vmap(step)))`` in the same process.

Ours, per env count N: ``GPUCartPole-v1`` (CUDA kernels, NEXT_STEP autoreset), a random
policy (``--policy``: one ``torch.randint`` per step, the env's own ``env.sample_actions()``,
or both, each timed), ``--num-steps`` T steps per call filling the trajectory
storage (obs, actions, rewards, terminated, truncated); the warm-up calls and the capture
are not timed. Gymnax, per N: the same T steps as one jitted ``lax.scan`` over the vmapped
``env.step``, random actions drawn inside the scan (``jax.random.randint``, a key split per
env and step, as PureJaxRL does); two variants: ``gymnax-scan`` keeps only the carry (the
issue's baseline) and ``gymnax-scan-trajectory`` also returns the stacked (obs, action,
reward, terminated, truncated), the data our storage holds. Each point: calls chained
(each starts where the last ended) for about ``--seconds`` per repeat, wall clock from a
synchronized start to a synchronized end, median of ``--repeats``; env-steps/s = N * T *
calls / time. ``--eager`` adds our roll-out with ``capture=False`` (the eager loop).

    python scripts/bench_capture.py [--vs gymnax] [--sizes 1,16,1024,16384,1048576]
        [--num-steps 128] [--repeats 5] [--json bench_capture.json]

On the GPU machine, with gymnax from the device kit's peers (about a minute):

    source .device-kit/setup.sh && source .device-kit/peers/setup.sh
    PYTHONPATH=$PEERS_PATH python3 scripts/bench_capture.py --vs gymnax --json out.json

Target (issue 16): ours >= 2x gymnax's scan at every N from 16 to 16,384, >= 1.5x at N = 1.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from typing import Any

import torch

import gpu_vecenv
from gpu_vecenv.bench import load_peer, machine_info
from gpu_vecenv.captured_rollout import WARMUP_CALLS

gymnax_peer = load_peer("gymnax_peer")  # benchmarks/: times gymnax, and ours the same way

SIZES = (1, 16, 1024, 16_384, 1_048_576)
TARGETS = {1: 1.5}
"""Issue 16's target ratio (ours / gymnax) where it is not 2x."""


POLICIES = ("randint", "sample_actions")


def bench_ours(n: int, args, device: torch.device, capture: bool = True,
               policy: str = "randint") -> dict[str, Any]:
    """Our captured (or, with ``capture=False``, eager) random-policy roll-out; ``policy``:
    one ``torch.randint`` a step, or ``env.sample_actions()``."""
    env = gpu_vecenv.make_vec("GPUCartPole-v1", n, device=device, backend=args.backend,
                              copy=False, autoreset_mode=args.autoreset_mode)
    if policy == "sample_actions":
        def act(obs):
            return env.sample_actions()
    else:
        def act(obs):
            return torch.randint(0, 2, (n,), device=device)
    rollout = gpu_vecenv.capture_rollout(env, act, args.num_steps, capture=capture)
    obs, _ = env.reset(seed=0)
    for _ in range(WARMUP_CALLS + 2):  # the eager warm-up, the capture, a replay
        obs = rollout(obs).next_obs
    next_obs = rollout.trajectory.next_obs  # each call starts where the last one ended

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    record = gymnax_peer.measure(lambda: rollout(next_obs), sync, args.seconds, args.repeats)
    rollout.check_errors()
    name = "gpu_vecenv-captured" if rollout.captured else "gpu_vecenv-eager"
    if policy != "randint":
        name += f"-{policy}"
    record.update(name=name, num_envs=n, backend=env.backend_name, captured=rollout.captured,
                  policy=policy)
    return record


def free_gpu_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def bench_gymnax(n: int, args, trajectory: bool) -> dict[str, Any]:
    """gymnax's CartPole-v1: ``num_steps`` vmapped steps of ``n`` envs as one jitted scan."""
    return gymnax_peer.time_rollout("GPUCartPole-v1", n, args.num_steps, args.seconds,
                                    args.repeats,
                        trajectory)


def _rate(value: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=lambda s: [int(float(x)) for x in s.split(",")],
                        default=list(SIZES), help="comma-separated env counts "
                        "(default 1,16,1024,16384,1048576)")
    parser.add_argument("--num-steps", type=int, default=128, help="T, steps per call")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per point (median)")
    parser.add_argument("--seconds", type=float, default=0.2, help="length of a timed run")
    parser.add_argument("--device", default=None, help="torch device (default: cuda if any)")
    parser.add_argument("--backend", default="auto", choices=["auto", "cuda", "torch"])
    parser.add_argument("--autoreset-mode", default="next_step")
    parser.add_argument("--vs", choices=["gymnax"], default=None,
                        help="also time gymnax's scan (where jax and gymnax import)")
    parser.add_argument("--policy", choices=[*POLICIES, "both"], default="randint",
                        help="our random policy: torch.randint a step (default), "
                             "env.sample_actions(), or both (each compared with the peer)")
    parser.add_argument("--eager", action="store_true",
                        help="also time our roll-out with capture=False")
    parser.add_argument("--json", default=None, metavar="PATH", help="write results as JSON")
    args = parser.parse_args()
    device = gpu_vecenv.devices.usable_device(args.device)
    skipped = None
    if args.vs == "gymnax":
        skipped = gymnax_peer.gymnax_problem()
        if skipped:
            print(f"gymnax not timed: {skipped}", flush=True)
    print(f"CartPole, T = {args.num_steps} steps per call, on {device}", flush=True)
    print(f"{'':34s} {'num_envs':>9s} {'env-steps/s':>12s} {'us/call':>10s} "
          f"{'host us/call':>13s}", flush=True)
    records, ratios = [], []
    policies = list(POLICIES) if args.policy == "both" else [args.policy]
    for n in args.sizes:
        ours_points = [bench_ours(n, args, device, policy=p) for p in policies]
        points = list(ours_points)
        if args.eager:
            points += [bench_ours(n, args, device, capture=False, policy=p) for p in policies]
        free_gpu_memory(device)  # the last size's storage and graph, before the next
        if args.vs == "gymnax" and not skipped:
            points += [bench_gymnax(n, args, trajectory=False),
                       bench_gymnax(n, args, trajectory=True)]
        for point in points:
            point["env_steps_per_s"] = n * args.num_steps / point["seconds_per_call"]
            print(f"{point['name']:34s} {n:>9d} {_rate(point['env_steps_per_s']):>12s} "
                  f"{point['seconds_per_call'] * 1e6:>10.1f} "
                  f"{point['host_seconds_per_call'] * 1e6:>13.1f}", flush=True)
        records += points
        for ours in ours_points:
            for peer in points:
                if not peer["name"].startswith("gymnax"):
                    continue
                target = TARGETS.get(n, 2.0)
                ratio = ours["env_steps_per_s"] / peer["env_steps_per_s"]
                ratios.append({"num_envs": n, "ours": ours["name"], "policy": ours["policy"],
                               "vs": peer["name"], "ratio": ratio, "target": target,
                               "met": ratio >= target})
                print(f"{'':34s} {'':>9s} {ours['name']} / {peer['name']}: {ratio:.2f}x "
                      f"(target {target}x: {'met' if ratio >= target else 'NOT met'})",
                      flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine_info(device), "settings": vars(args),
                       "gymnax_skipped": skipped, "results": records, "ratios": ratios},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
