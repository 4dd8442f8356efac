"""The fused PPO update's kernels alone, per product variant: microseconds of one
minibatch step (``ppo_update_tiles`` + ``ppo_reduce_grads`` + ``clip_grads``) of CartPole's
64x64 tanh actor-critic at minibatch sizes of the README main job (128 rows) and of the
PureJaxRL comparison (8,192 and 65,536), plus ``mlp_values`` over 262,144 rows.

    python scripts/lab/bench_fused_update.py out.json [--sizes 128,8192,65536]
        [--variants "0 1 3 3:-DMMA_ROUND_NEAREST=1"]

A variant is ``MMA[@TILE][:EXTRA_FLAG,...]``: ``-DMMA_PRECISION``, the tile (default: the
largest that fits) and lab ``-D`` flags of ``cuda_src/ppo_mlp.cu``. Also timed: ``ppo_act``
over 2,048 and 16,384 rows (a roll-out step of the PureJaxRL comparison) and
``advantage_stats`` of 4 minibatches of 65,536. Variants
alternate within each of ``--rounds`` rounds; the JSON holds every round, the table the
medians. CUDA events around ``--reps`` steps. Run from an earlier tree (``PYTHONPATH``)
whose kernels take no ``mma``, every variant is its FMAs.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics

import gymnasium as gym
import torch

from gpu_vecenv.train import ppo_mlp_kernels
from gpu_vecenv.train.distributions import ActionSpec
from gpu_vecenv.train.networks import ActorCritic


def build(variant: str):
    head, _, extra = variant.partition(":")
    mma, _, tile = head.partition("@")
    flags = tuple(f for f in extra.split(",") if f)
    original = ppo_mlp_kernels.compile_flags

    def with_extra(*args, **kwargs):
        return (*original(*args, **kwargs), *flags)

    ppo_mlp_kernels.compile_flags = with_extra
    try:
        spec = ActionSpec.from_space(gym.spaces.Discrete(2))
        torch.manual_seed(0)
        model = ActorCritic(4, spec, (64, 64), "tanh", -0.5, False).cuda()
        if "mma" in inspect.signature(ppo_mlp_kernels.FusedPPO).parameters:
            fused = ppo_mlp_kernels.FusedPPO(model, spec, 4, (64, 64), "tanh", False,
                                             mma=int(mma), tile=int(tile) if tile else None)
        else:  # an earlier tree (float32 FMAs only): the variant's number is ignored
            fused = ppo_mlp_kernels.FusedPPO(model, spec, 4, (64, 64), "tanh", False)
            fused.mma_precision = 0
    finally:
        ppo_mlp_kernels.compile_flags = original
    return fused


def batch(rows: int):
    g = torch.Generator(device="cuda").manual_seed(1)
    return {"obs": torch.randn(rows, 4, device="cuda", generator=g),
            "actions": torch.randint(0, 2, (rows,), device="cuda", generator=g),
            "log_probs": torch.randn(rows, device="cuda", generator=g) * 0.1 - 0.7,
            "advantages": torch.randn(rows, device="cuda", generator=g),
            "returns": torch.randn(rows, device="cuda", generator=g),
            "values": torch.randn(rows, device="cuda", generator=g)}


def time_us(fn, reps: int) -> float:
    for _ in range(5):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / reps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--sizes", default="128,8192,65536")
    parser.add_argument("--variants", default="0 1 3")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    variants = args.variants.split()
    fused = {v: build(v) for v in variants}
    data = {s: batch(4 * s) for s in sizes}
    orders = {s: torch.randperm(4 * s, device="cuda") for s in sizes}
    obs_values = torch.randn(262144, 4, device="cuda")
    out_values = torch.empty(262144, device="cuda")
    adv_big = torch.randn(4 * 65536, device="cuda")
    order_big = torch.randperm(4 * 65536, device="cuda")
    adv_out = torch.empty(8, device="cuda")
    act_args = {n: (torch.randn(n, 4, device="cuda"), torch.rand(n, 1, device="cuda"),
                    torch.empty(n, 4, device="cuda"),
                    torch.empty(n, 1, dtype=torch.int64, device="cuda"),
                    torch.empty(n, device="cuda"),
                    torch.empty(n, 1, dtype=torch.int64, device="cuda")) for n in (2048, 16384)}
    results: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    for _ in range(args.rounds):
        for v in variants:
            f = fused[v]
            for s in sizes:
                stats = torch.zeros(2, device="cuda")
                f.advantage_stats(data[s]["advantages"], orders[s], s, 1, stats)

                def step(f=f, s=s, stats=stats):
                    f.minibatch_gradient(data[s], orders[s], 0, s, stats, 0.2, 0.01, 0.5,
                                         True, True)
                    f.clip_gradient(0.5)

                results[v].setdefault(str(s), []).append(time_us(step, args.reps))
            results[v].setdefault("values_262144", []).append(
                time_us(lambda f=f: f.values(obs_values, out_values), 50))
            results[v].setdefault("adv_stats_4x65536", []).append(
                time_us(lambda f=f: f.advantage_stats(adv_big, order_big, 65536, 4, adv_out),
                        200))
            for n in (2048, 16384):
                results[v].setdefault(f"act_{n}", []).append(
                    time_us(lambda f=f, n=n: f.act(*act_args[n]), 200))
    report = {"device": torch.cuda.get_device_name(), "reps": args.reps,
              "mma_precision_run": {v: fused[v].mma_precision for v in variants},
              "microseconds": results,
              "medians": {v: {k: statistics.median(x) for k, x in r.items()}
                          for v, r in results.items()}}
    with open(args.out, "w") as fh:
        json.dump(report, fh, indent=1)
    cols = [str(s) for s in sizes] + ["values_262144", "adv_stats_4x65536", "act_2048",
                                       "act_16384"]
    print("variant".ljust(36) + "".join(c.rjust(16) for c in cols) + "   (us, median)")
    for v in variants:
        print(v.ljust(36) + "".join(f"{report['medians'][v][c]:16.1f}" for c in cols))


if __name__ == "__main__":
    main()
