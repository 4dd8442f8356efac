"""Gradient averaging on several GPUs: the trainer's flat all-reduce against PyTorch's
DistributedDataParallel (DDP), one optimizer step of PPO's torch path at a time; JSON out.

    torchrun --standalone --nproc-per-node 2 scripts/bench_grad_sync.py grad_sync.json

For each network (CartPole's 64x64 tanh, tag_ppo's 256x256 relu) and minibatch size, each
rank times ``--steps`` optimizer steps (forward, backward, gradient averaging over the
ranks, clipping, Adam) with CUDA events, after ``--warmup`` steps, both ways, alternating
five rounds so that a drifting clock hurts neither side; rank 0 reports the median
milliseconds per step of each way and their ratio:

- ``flat``: backward, then :func:`gpu_vecenv.train.distributed.average_gradients` (every
  gradient copied into one buffer, one all-reduce, the gradients become views into it);
- ``ddp``: ``torch.nn.parallel.DistributedDataParallel`` around the same network, whose
  bucketed all-reduces start during backward.

Both ways compute the same averaged gradient (checked on the first step, to float
rounding). The trainer's fused PPO kernels and CUDA-graphed updates keep one flat
gradient buffer of their own; this isolates the gradient averaging itself.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from gpu_vecenv.train import distributed
from gpu_vecenv.train.distributions import ActionSpec
from gpu_vecenv.train.networks import ActorCritic

NETWORKS = {  # name: (obs size, action space, hidden sizes, activation)
    "cartpole_64x64_tanh": (4, ("discrete", 2), (64, 64), "tanh"),
    "tag_256x256_relu": (72, ("multi_discrete", (21, 21)), (256, 256), "relu"),
}


class Evaluate(torch.nn.Module):
    """``model.evaluate`` as ``forward`` (what DDP hooks)."""

    def __init__(self, model: ActorCritic):
        super().__init__()
        self.model = model

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        log_prob, entropy, value = self.model.evaluate(obs, action)
        return -(log_prob.mean() + 0.01 * entropy.mean()) + 0.5 * value.square().mean()


def spec_of(kind: str, arg) -> ActionSpec:
    import gymnasium as gym

    space = gym.spaces.Discrete(arg) if kind == "discrete" else gym.spaces.MultiDiscrete(arg)
    return ActionSpec.from_space(space)


def make(name: str, device: torch.device):
    obs_dim, (kind, arg), hidden, activation = NETWORKS[name]
    torch.manual_seed(0)
    model = ActorCritic(obs_dim, spec_of(kind, arg), hidden, activation).to(device)
    return model, obs_dim, kind, arg


def batch(obs_dim: int, kind: str, arg, size: int, device: torch.device):
    g = torch.Generator(device=device).manual_seed(1 + distributed.rank())
    obs = torch.randn(size, obs_dim, device=device, generator=g)
    highs = [arg] if kind == "discrete" else list(arg)
    action = torch.stack([torch.randint(0, h, (size,), device=device, generator=g)
                          for h in highs], -1)
    return obs, action.squeeze(-1) if kind == "discrete" else action


def timed(step, steps: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?")
    parser.add_argument("--minibatch", default="8192,131072",
                        help="samples per rank and optimizer step")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    device = torch.device("cuda", distributed.local_rank())
    distributed.init(device)
    results = []
    for name in NETWORKS:
        for size in (int(x) for x in args.minibatch.split(",")):
            model, obs_dim, kind, arg = make(name, device)
            ddp_model, _, _, _ = make(name, device)
            loss_fn = Evaluate(model)
            ddp = torch.nn.parallel.DistributedDataParallel(Evaluate(ddp_model),
                                                            device_ids=[device.index])
            opt = torch.optim.Adam(model.parameters(), lr=1e-4)
            ddp_opt = torch.optim.Adam(ddp.parameters(), lr=1e-4)
            obs, action = batch(obs_dim, kind, arg, size, device)

            def flat_step(model=model, loss_fn=loss_fn, opt=opt, obs=obs, action=action):
                opt.zero_grad()
                loss_fn(obs, action).backward()
                distributed.average_gradients(model.parameters())
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                opt.step()

            def ddp_step(ddp=ddp, opt=ddp_opt, obs=obs, action=action):
                opt.zero_grad()
                ddp(obs, action).backward()
                torch.nn.utils.clip_grad_norm_(ddp.parameters(), 0.5)
                opt.step()

            # The same averaged gradient both ways (before any step moved the weights).
            loss_fn(obs, action).backward()
            distributed.average_gradients(model.parameters())
            ddp(obs, action).backward()
            worst = max((a.grad - b.grad).abs().max().item() for a, b in
                        zip(model.parameters(), ddp.module.model.parameters(), strict=True))
            for _ in range(args.warmup):
                flat_step()
                ddp_step()
            rounds = {"flat": [], "ddp": []}
            for _ in range(5):
                rounds["flat"].append(timed(flat_step, args.steps))
                rounds["ddp"].append(timed(ddp_step, args.steps))
            row = {"network": name, "minibatch_per_rank": size,
                   "world_size": distributed.world_size(),
                   "parameters": sum(p.numel() for p in model.parameters()),
                   "flat_ms_per_step": statistics.median(rounds["flat"]),
                   "ddp_ms_per_step": statistics.median(rounds["ddp"]),
                   "rounds_ms": rounds, "max_gradient_difference": worst}
            row["ddp_over_flat"] = row["ddp_ms_per_step"] / row["flat_ms_per_step"]
            if distributed.is_main():
                print(json.dumps({k: v for k, v in row.items() if k != "rounds_ms"}),
                      flush=True)
            results.append(row)
    if distributed.is_main() and args.out:
        Path(args.out).write_text(json.dumps({
            "device": torch.cuda.get_device_name(device), "results": results}, indent=1))
    distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
