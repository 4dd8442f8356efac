"""A TorchRL collector over a GPU env: batches of transitions that never leave the device.

    python examples/torchrl_collector.py --num-envs 4096 --frames-per-batch 131072

The env is a TorchRL ``EnvBase`` with ``batch_size=[num_envs]``; TorchRL resets finished
envs itself through ``"_reset"``. The policy here is a small untrained MLP actor sampling
from a categorical distribution; plug in your own module and loss (e.g. ``ClipPPOLoss``).

CPU threads: ``--threads`` (default 1) sets torch's CPU thread count. On a few cores shared
with other work, torch's default (one thread per core) makes small tensor ops several
times slower, not faster (docs/adapters.md, "CPU threads"); ``--threads 0`` keeps it.
"""

from __future__ import annotations

import argparse
import time

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import ProbabilisticActor

from gpu_vecenv.adapters.torchrl import TorchRLEnv

try:  # TorchRL >= 0.11 names the synchronous collector Collector
    from torchrl.collectors import Collector
except ImportError:  # older TorchRL
    from torchrl.collectors import SyncDataCollector as Collector


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="GPUCartPole-v1", help="a Discrete-action env")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--frames-per-batch", type=int, default=4096 * 32)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (0: torch's default, one per core)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    env = TorchRLEnv(args.env_id, num_envs=args.num_envs, device=args.device)
    env.set_seed(args.seed)
    obs_dim = env.observation_spec["observation"].shape[-1]
    num_actions = env.action_spec.space.n
    logits = TensorDictModule(
        nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, num_actions)),
        in_keys=["observation"], out_keys=["logits"],
    ).to(args.device)
    # a categorical over action indices, matching the env's Categorical action spec
    actor = ProbabilisticActor(logits, in_keys=["logits"], out_keys=["action"],
                               distribution_class=_IndexCategorical, return_log_prob=True)

    collector = Collector(env, actor, frames_per_batch=args.frames_per_batch,
                          total_frames=args.frames_per_batch * args.batches,
                          device=args.device)
    start = time.perf_counter()
    with set_exploration_type(ExplorationType.RANDOM):
        for i, batch in enumerate(collector):
            done = batch["next", "done"]
            rewards = batch["next", "reward"]
            print(f"batch {i}: {tuple(batch.batch_size)} on {batch.device}, "
                  f"{int(done.sum())} episodes ended, mean reward {float(rewards.mean()):.3f}")
    elapsed = time.perf_counter() - start
    collector.shutdown()
    frames = args.frames_per_batch * args.batches
    print(f"{frames} frames in {elapsed:.2f}s ({frames / elapsed:,.0f} frames/s)")


class _IndexCategorical(torch.distributions.Categorical):
    """``torch.distributions.Categorical`` built from ``logits=``: integer action indices."""

    def __init__(self, logits: torch.Tensor):
        super().__init__(logits=logits)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.probs.argmax(-1)


if __name__ == "__main__":
    main()
