"""Single-file PPO in the style of CleanRL's ``ppo_continuous_action_isaacgym.py``: the envs,
the rollout storage, the networks and every update live on one torch device.

    python examples/cleanrl_ppo.py                                  # GPU if there is one
    python examples/cleanrl_ppo.py --device cpu --num-envs 8 --total-timesteps 100000

The env comes straight from ``gymnasium.make_vec("GPUCartPole-v1", ...)`` and speaks torch:
no numpy, no host copies inside the loop (the only syncs are the progress prints). It runs
in ``SAME_STEP`` autoreset mode so that an episode cut by the time limit is bootstrapped
from its true final observation (``info["final_obs"]``) instead of being treated as a death.
Episode returns come from ``gpu_vecenv.wrappers.RecordEpisodeStatistics``, kept on the
device. Discrete action spaces only, to stay short. With the defaults it reaches CartPole's
maximum return (500) within its 2M steps.

CPU threads: torch's default of one thread per core makes these small networks and
1,024-row batches slower, not faster, on a few shared cores (threads wait on each other),
so ``--threads`` defaults to 1. ``--threads 0`` keeps torch's default.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import random
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions.categorical import Categorical

from gpu_vecenv.wrappers import RecordEpisodeStatistics


@dataclass
class Args:
    env_id: str = "GPUCartPole-v1"
    """the id of the environment (a Discrete-action env)"""
    seed: int = 1
    """seed of the experiment"""
    device: str = "cuda" if torch.cuda.is_available() else "cpu"
    """torch device of the envs, the networks and the storage"""
    threads: int = 1
    """torch CPU threads (0: torch's default, one per core)"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    total_timesteps: int = 2_000_000
    """total env steps of the experiment"""
    learning_rate: float = 2.5e-3
    """the learning rate of the optimizer"""
    num_envs: int = 1024
    """the number of parallel envs"""
    num_steps: int = 16
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """toggle learning rate annealing"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """toggles whether or not to use a clipped loss for the value function"""
    ent_coef: float = 0.0
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    log_every: int = 10
    """print progress every this many iterations"""

    # filled in at run time
    batch_size: int = dataclasses.field(default=0, init=False)
    """the batch size (computed: num_envs * num_steps)"""
    minibatch_size: int = dataclasses.field(default=0, init=False)
    """the mini-batch size (computed: batch_size // num_minibatches)"""
    num_iterations: int = dataclasses.field(default=0, init=False)
    """the number of iterations (computed: total_timesteps // batch_size)"""


def parse_args() -> Args:
    """Command-line flags from the fields of :class:`Args`; each field's docstring is its
    ``--help`` text (what CleanRL gets from ``tyro``, without the dependency)."""
    docs: dict[str, str] = {}
    body = ast.parse(inspect.getsource(Args)).body[0].body
    for node, following in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(following, ast.Expr):
            docs[node.target.id] = following.value.value
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(Args):
        if not field.init:
            continue
        flag = "--" + field.name.replace("_", "-")
        if field.type in ("bool", bool):
            parser.add_argument(
                flag,
                type=lambda s: s.lower() in ("1", "true", "yes"),
                default=field.default,
                help=docs.get(field.name),
            )
        else:
            cast = {"int": int, "float": float, "str": str}[str(field.type)]
            parser.add_argument(flag, type=cast, default=field.default, help=docs.get(field.name))
    args = Args(**vars(parser.parse_args()))
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    return args


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int, num_actions: int):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, num_actions), std=0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def main() -> None:
    args = parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    # env setup: tensors in, tensors out, all on `device`; episode statistics on the device
    envs = gym.make_vec(
        args.env_id,
        num_envs=args.num_envs,
        device=device,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    envs = RecordEpisodeStatistics(envs)
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "Discrete actions only"
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    agent = Agent(obs_dim, int(envs.single_action_space.n)).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # storage setup
    obs = torch.zeros((args.num_steps, args.num_envs, obs_dim), device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.int64, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = torch.zeros((args.num_steps, args.num_envs), device=device)
    dones = torch.zeros((args.num_steps, args.num_envs), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)

    global_step = 0
    start_time = time.time()
    next_obs, _ = envs.reset(seed=args.seed)
    next_done = torch.zeros(args.num_envs, device=device)

    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            next_obs, reward, terminated, truncated, info = envs.step(action)
            # a time-limit cut is not a death: bootstrap from the true final observation
            with torch.no_grad():
                final_value = agent.get_value(info["final_obs"]).flatten()
            rewards[step] = reward + args.gamma * final_value * truncated * ~terminated
            next_done = (terminated | truncated).float()

        # bootstrap value if not done
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = (
                    delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                )
            returns = advantages + values

        # flatten the batch
        b_obs = obs.reshape(-1, obs_dim)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        # optimizing the policy and value network
        clipfracs = []
        for _epoch in range(args.update_epochs):
            b_inds = torch.randperm(args.batch_size, device=device)
            for start in range(0, args.batch_size, args.minibatch_size):
                mb_inds = b_inds[start : start + args.minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb_inds], b_actions[mb_inds]
                )
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # http://joschu.net/blog/kl-approx.html
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (
                        mb_advantages.std() + 1e-8
                    )

                # policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(
                    ratio, 1 - args.clip_coef, 1 + args.clip_coef
                )
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # value loss
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

        if iteration % args.log_every == 0 or iteration == args.num_iterations:
            # the only host syncs of the run: progress numbers (the mean return of the
            # episodes finished since the last print)
            mean_return = envs.episode_summary()["mean_return"]
            sps = int(global_step / (time.time() - start_time))
            print(
                f"iteration {iteration}/{args.num_iterations} global_step={global_step} "
                f"episodic_return={mean_return:.1f} approx_kl={float(approx_kl):.4f} "
                f"clipfrac={float(torch.stack(clipfracs).mean()):.3f} SPS={sps}",
                flush=True,
            )

    envs.close()


if __name__ == "__main__":
    main()
