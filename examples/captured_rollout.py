"""A torch policy's roll-outs replayed as CUDA graphs: ``gpu_vecenv.capture_rollout``.

    python examples/captured_rollout.py --num-envs 4096 --num-steps 128 --calls 50

A small MLP samples CartPole actions; each call runs ``--num-steps`` steps of policy and env
and fills one preallocated trajectory (obs, actions, rewards, terminated, truncated). The
first two calls run eagerly (the warm-up), the third captures the steps into a CUDA graph,
and every call from then on is one replay with the eager loop's results. On the CPU every
call runs the eager loop.
"""

from __future__ import annotations

import argparse
import time

import torch

import gpu_vecenv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="GPUCartPole-v1")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--num-steps", type=int, default=128, help="steps per call")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    device = torch.device(args.device)

    env = gpu_vecenv.make_vec(args.env_id, args.num_envs, device=device)
    torch.manual_seed(args.seed)
    net = torch.nn.Sequential(torch.nn.Linear(env.obs_dim, 64), torch.nn.Tanh(),
                              torch.nn.Linear(64, int(env.single_action_space.n))).to(device)

    def policy(obs: torch.Tensor) -> torch.Tensor:
        """Samples from softmax(logits) with Gumbel noise: torch ops only, no host sync
        (torch.distributions.Categorical works too, with validate_args=False)."""
        logits = net(obs)
        return torch.argmax(logits - torch.log(-torch.log(torch.rand_like(logits))), dim=-1)

    rollout = gpu_vecenv.capture_rollout(env, policy, num_steps=args.num_steps)
    obs, _ = env.reset(seed=args.seed)
    rewards = torch.zeros((), device=device)
    episodes = torch.zeros((), dtype=torch.int64, device=device)
    timed_from = min(3, args.calls - 1)  # after the warm-up and the capture
    for call in range(args.calls):
        if call == timed_from:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
        trajectory = rollout(obs)  # (num_steps, num_envs, ...) tensors, overwritten each call
        obs = trajectory.next_obs
        # a learner would read trajectory.obs, .actions, .rewards, ... here
        rewards += trajectory.rewards.sum()
        episodes += (trajectory.terminated | trajectory.truncated).sum()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    rollout.check_errors()

    how = "captured" if rollout.captured else f"eager: {rollout.eager_reason}"
    steps = env.num_envs * args.num_steps
    print(f"{args.env_id}: {env.num_envs} envs x {args.num_steps} steps x {args.calls} calls "
          f"on {device} ({how}): {steps * (args.calls - timed_from) / elapsed:,.0f} env-steps/s "
          f"after the warm-up; {int(episodes)} episodes ended, mean reward per step "
          f"{float(rewards) / (steps * args.calls):.3f}")


if __name__ == "__main__":
    main()
