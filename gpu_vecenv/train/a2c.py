"""A2C: one policy-gradient step on the whole roll-out (``T * N`` rows) per iteration.

The roll-out, storage and advantages are :class:`~gpu_vecenv.train.on_policy.
OnPolicyLearner`'s; the losses are :mod:`gpu_vecenv.train.losses`'.
"""

from __future__ import annotations

import torch

from gpu_vecenv.train import distributed, losses, masked
from gpu_vecenv.train.on_policy import OnPolicyLearner
from gpu_vecenv.train.optimizers import Adam, RMSprop


class A2CLearner(OnPolicyLearner):
    """A2C (``A2CConfig``): advantage actor-critic, RMSprop (or Adam)."""

    def make_optimizer(self) -> Adam | RMSprop:
        if self.config.optimizer == "rmsprop":
            return RMSprop(self.model.parameters(), self.config.learning_rate, alpha=0.99,
                           eps=1e-5)
        return super().make_optimizer()

    def optimize(self, values: torch.Tensor, advantages: torch.Tensor,
                 returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """One step on the loss of every stored row (``values`` unused: A2C's value loss
        is not clipped); a masked learner's idle rows weigh 0."""
        c, s = self.config, self.storage
        log_prob, entropy, value = self.model.evaluate(s.flat(s.obs), s.flat(s.actions))
        adv = advantages.reshape(-1)
        mask = None if s.mask is None else s.flat(s.mask)
        weights = None if mask is None else masked.row_weights(mask)
        if c.norm_adv and mask is not None:
            adv = masked.normalize_advantages(adv, mask)  # over all ranks
        elif c.norm_adv:
            adv = distributed.normalize_advantages(adv)  # over all ranks
        policy_loss = losses.policy_gradient_loss(log_prob, adv, weights)
        v_loss = losses.value_loss(value, returns.reshape(-1), weights=weights)
        entropy_mean = losses.entropy_bonus(entropy, weights)
        loss = policy_loss - c.ent_coef * entropy_mean + c.vf_coef * v_loss
        self.step(loss)
        return {"loss": loss.detach(), "policy_loss": policy_loss.detach(),
                "value_loss": v_loss.detach(), "entropy": entropy_mean.detach()}
