"""A2C: one policy-gradient step on the whole roll-out (``T * N`` rows) per iteration.

The roll-out, storage and advantages are :class:`~gpu_vecenv.train.on_policy.
OnPolicyLearner`'s; the losses are :mod:`gpu_vecenv.train.losses`'.
"""

from __future__ import annotations

import torch

from gpu_vecenv.train import losses, masked
from gpu_vecenv.train.compiled_loss import maybe_compile
from gpu_vecenv.train.config import A2CConfig
from gpu_vecenv.train.networks import ActorCritic
from gpu_vecenv.train.on_policy import OnPolicyLearner
from gpu_vecenv.train.optimizers import Adam, RMSprop

STATISTICS = ("loss", "policy_loss", "value_loss", "entropy")
"""What :func:`a2c_loss` returns besides the loss, in order."""


def a2c_loss(model: ActorCritic, c: A2CConfig, obs: torch.Tensor, actions: torch.Tensor,
             advantages: torch.Tensor, returns: torch.Tensor,
             mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A2C's loss on the roll-out's rows (``(R, D)``, ``(R, *A)``, ``(R,)``, ``(R,)``) and
    its detached :data:`STATISTICS` ``(4,)``; with ``mask`` ``(R,)`` the idle rows weigh 0
    (:mod:`gpu_vecenv.train.masked`)."""
    log_prob, entropy, value = model.evaluate(obs, actions)
    weights, advantages = masked.weights_and_advantages(advantages, mask, c.norm_adv)
    policy_loss = losses.policy_gradient_loss(log_prob, advantages, weights)
    v_loss = losses.value_loss(value, returns, weights=weights)
    entropy_mean = losses.entropy_bonus(entropy, weights)
    loss = policy_loss - c.ent_coef * entropy_mean + c.vf_coef * v_loss
    return loss, torch.stack([loss, policy_loss, v_loss, entropy_mean]).detach()


class A2CLearner(OnPolicyLearner):
    """A2C (``A2CConfig``): advantage actor-critic, RMSprop (or Adam)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss = maybe_compile(a2c_loss, self.compile_update, self.device)

    def make_optimizer(self) -> Adam | RMSprop:
        if self.config.optimizer == "rmsprop":
            return RMSprop(self.model.parameters(), self.config.learning_rate, alpha=0.99,
                           eps=1e-5)
        return super().make_optimizer()

    def optimize(self, values: torch.Tensor, advantages: torch.Tensor,
                 returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """One step on the loss of every stored row (``values`` unused: A2C's value loss
        is not clipped); a masked learner's idle rows weigh 0."""
        s = self.storage
        loss, stats = self.loss(self.model, self.config, s.flat(s.obs), s.flat(s.actions),
                                advantages.reshape(-1), returns.reshape(-1),
                                None if s.mask is None else s.flat(s.mask))
        self.step(loss)
        return dict(zip(STATISTICS, stats.unbind(), strict=True))
