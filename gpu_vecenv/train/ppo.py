"""PPO: epochs of shuffled minibatches on the clipped surrogate (CleanRL's ``ppo.py``).

The roll-out, storage and GAE are :class:`~gpu_vecenv.train.on_policy.OnPolicyLearner`'s;
the losses are :mod:`gpu_vecenv.train.losses`'. ``B`` = minibatch rows. The only host
read is the optional ``target_kl`` check (one per epoch). The same update through the
fused CUDA kernels is :class:`gpu_vecenv.train.fused_ppo_learner.FusedPPOLearner`.
"""

from __future__ import annotations

import torch

from gpu_vecenv.train import distributed, losses, masked
from gpu_vecenv.train.compiled_loss import maybe_compile
from gpu_vecenv.train.config import PPOConfig
from gpu_vecenv.train.distributions import ActionSpec
from gpu_vecenv.train.networks import ActorCritic
from gpu_vecenv.train.on_policy import OnPolicyLearner

STATISTICS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
"""What :func:`ppo_minibatch_loss` returns besides the loss, in order."""


def ppo_minibatch_loss(model: ActorCritic, c: PPOConfig, obs: torch.Tensor,
                       actions: torch.Tensor, old_log_probs: torch.Tensor,
                       advantages: torch.Tensor, returns: torch.Tensor,
                       old_values: torch.Tensor, mask: torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's loss on one minibatch (rows already gathered: ``(B, D)``, ``(B, *A)``,
    ``(B,)`` ...) and its detached :data:`STATISTICS` ``(6,)``: loss, policy loss, value
    loss, entropy, approx KL, clip fraction. With ``mask`` ``(B,)`` (1 = live, 0 = an
    idle multi-agent slot) every mean and the advantage normalisation are over the live
    rows only (:mod:`gpu_vecenv.train.masked`)."""
    log_prob, entropy, value = model.evaluate(obs, actions)
    weights, advantages = masked.weights_and_advantages(advantages, mask, c.norm_adv)
    policy_loss = losses.clipped_surrogate_loss(log_prob, old_log_probs, advantages,
                                                c.clip_coef, weights)
    v_loss = losses.value_loss(value, returns, old_values,
                               c.clip_coef if c.clip_vloss else None, weights)
    entropy_mean = losses.entropy_bonus(entropy, weights)
    loss = policy_loss - c.ent_coef * entropy_mean + c.vf_coef * v_loss
    with torch.no_grad():
        kl, clip_fraction = losses.ratio_statistics(log_prob, old_log_probs, c.clip_coef,
                                                    weights)
        stats = torch.stack([loss, policy_loss, v_loss, entropy_mean, kl, clip_fraction])
    return loss, stats.detach()


def ppo_metrics(totals: torch.Tensor, count: int, num_minibatches: int
                ) -> dict[str, torch.Tensor]:
    """The logged means of ``totals`` ``(6,)`` (the sums of :data:`STATISTICS` over
    ``count`` minibatch steps) and the epochs run."""
    metrics = dict(zip(STATISTICS, (totals / count).unbind(), strict=True))
    metrics["epochs"] = torch.tensor(float(count) / num_minibatches)
    return metrics


class PPOLearner(OnPolicyLearner):
    """PPO (``PPOConfig``) with torch ops and autograd.

    Raises:
        ValueError: a roll-out too small for its minibatches: fewer samples than
            ``num_minibatches`` (empty minibatches), or minibatches of one sample with
            ``norm_adv`` (the standard deviation of one advantage is NaN).
    """

    def __init__(self, config: PPOConfig, obs_dim: int, spec: ActionSpec, num_slots: int,
                 device: torch.device, generator: torch.Generator, masked: bool = False,
                 compile_update: bool = False):
        batch = num_slots * config.num_steps
        minibatch = batch // config.num_minibatches
        if minibatch < 1 or (minibatch < 2 and config.norm_adv):
            raise ValueError(
                f"PPO: a roll-out of {batch} samples ({num_slots} slots x num_steps "
                f"{config.num_steps}) split into num_minibatches {config.num_minibatches} "
                f"gives minibatches of {minibatch} sample(s); need at least "
                f"{2 if config.norm_adv else 1}{' with norm_adv' if config.norm_adv else ''}: "
                "use fewer minibatches, more envs or more steps")
        super().__init__(config, obs_dim, spec, num_slots, device, generator, masked,
                         compile_update)
        self.minibatch_loss = maybe_compile(ppo_minibatch_loss, compile_update, device)

    def optimize(self, values: torch.Tensor, advantages: torch.Tensor,
                 returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """``update_epochs`` passes over ``num_minibatches`` shuffled minibatches of the
        roll-out (fewer epochs when the epoch's mean KL passes ``target_kl``)."""
        c, s = self.config, self.storage
        obs, actions = s.flat(s.obs), s.flat(s.actions)
        old_log_probs, old_values = s.flat(s.log_probs), values.reshape(-1)
        advantages, returns = advantages.reshape(-1), returns.reshape(-1)
        mask = None if s.mask is None else s.flat(s.mask)
        batch = obs.shape[0]
        minibatch = max(1, batch // c.num_minibatches)
        totals = torch.zeros(6, device=self.device)
        count = 0
        for _ in range(c.update_epochs):
            order = torch.randperm(batch, device=self.device, generator=self.generator)
            epoch_kl = torch.zeros((), device=self.device)
            for start in range(0, minibatch * c.num_minibatches, minibatch):
                idx = order[start:start + minibatch]
                loss, stats = self.minibatch_loss(self.model, c, obs[idx], actions[idx],
                                                  old_log_probs[idx], advantages[idx],
                                                  returns[idx], old_values[idx],
                                                  None if mask is None else mask[idx])
                self.step(loss)
                totals += stats
                epoch_kl += stats[4] / c.num_minibatches
                count += 1
            # Every rank must stop after the same epoch: the KL of all ranks decides.
            if c.target_kl is not None and \
                    float(distributed.all_reduce_mean_(epoch_kl)) > c.target_kl:
                break
        return ppo_metrics(totals, count, c.num_minibatches)
