"""PPO and A2C for one policy: acting during the roll-out and the update after it.

A learner owns its network, optimizer and :class:`RolloutStorage`; the trainer loop
feeds it the observations of its agent slots. ``N`` = the policy's slots, ``T`` =
``num_steps``. Nothing here reads a tensor value on the host, except PPO's optional
``target_kl`` check (one read per epoch). On a GPU, PPO runs its roll-out sampling and
update through the fused kernels of :mod:`gpu_vecenv.train.fused` where they apply.
"""

from __future__ import annotations

import math

import torch

from gpu_vecenv.train import losses
from gpu_vecenv.train.config import A2CConfig, PPOConfig
from gpu_vecenv.train.distributions import ActionSpec
from gpu_vecenv.train.fused import FusedPPO, fused_blockers
from gpu_vecenv.train.networks import ActorCritic
from gpu_vecenv.train.optimizers import Adam, RMSprop
from gpu_vecenv.train.storage import RolloutStorage


def ppo_minibatch_loss(model: ActorCritic, c: PPOConfig, obs: torch.Tensor,
                       actions: torch.Tensor, old_log_probs: torch.Tensor,
                       advantages: torch.Tensor, returns: torch.Tensor,
                       old_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's loss on one minibatch (rows already gathered: ``(B, D)``, ``(B, *A)``,
    ``(B,)`` ...) and its detached statistics ``(6,)``: loss, policy loss, value loss,
    entropy, approx KL, clip fraction."""
    log_prob, entropy, value = model.evaluate(obs, actions)
    if c.norm_adv:
        advantages = losses.normalize_advantages(advantages)
    policy_loss = losses.clipped_surrogate_loss(log_prob, old_log_probs, advantages,
                                                c.clip_coef)
    v_loss = losses.value_loss(value, returns, old_values,
                               c.clip_coef if c.clip_vloss else None)
    entropy_mean = losses.entropy_bonus(entropy)
    loss = policy_loss - c.ent_coef * entropy_mean + c.vf_coef * v_loss
    with torch.no_grad():
        kl, clip_fraction = losses.ratio_statistics(log_prob, old_log_probs, c.clip_coef)
        stats = torch.stack([loss, policy_loss, v_loss, entropy_mean, kl, clip_fraction])
    return loss, stats.detach()


def _ppo_metrics(totals: torch.Tensor, count: int, num_minibatches: int
                 ) -> dict[str, torch.Tensor]:
    """The logged means of ``totals`` (the sums of :func:`ppo_minibatch_loss`'s statistics
    over ``count`` minibatch steps) and the epochs run."""
    names = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
    metrics = dict(zip(names, (totals / count).unbind(), strict=True))
    metrics["epochs"] = torch.tensor(float(count) / num_minibatches)
    return metrics


class OnPolicyLearner:
    """PPO (``PPOConfig``) or A2C (``A2CConfig``) for ``num_slots`` agent slots.

    ``fused``: run PPO with the fused CUDA kernels of :mod:`gpu_vecenv.train.fused`
    (``None``: where they apply; ``True``: required, a ``ValueError`` says why not;
    ``False``: torch ops and autograd).
    """

    def __init__(self, config: PPOConfig | A2CConfig, obs_dim: int, spec: ActionSpec,
                 num_slots: int, device: torch.device, generator: torch.Generator,
                 fused: bool | None = False):
        self.config = config
        self.spec = spec
        self.device = device
        self.generator = generator
        self.is_ppo = isinstance(config, PPOConfig)
        self.model = ActorCritic(obs_dim, spec, tuple(config.hidden_sizes), config.activation,
                                 config.init_log_std, config.normalize_obs).to(device)
        self.fused = self._fused_kernels(fused, obs_dim, num_slots)
        # Step count and learning rate live in device tensors (see optimizers.py), so the
        # update can be captured into a CUDA graph and annealing still reaches it.
        if not self.is_ppo and config.optimizer == "rmsprop":
            self.optimizer: Adam | RMSprop = RMSprop(self.model.parameters(),
                                                     config.learning_rate, alpha=0.99,
                                                     eps=1e-5)
        else:
            self.optimizer = Adam(self.model.parameters(), config.learning_rate, eps=1e-5)
        self.storage = RolloutStorage(config.num_steps, num_slots, obs_dim, spec.action_shape,
                                      spec.dtype, device)
        if spec.kind == "box":
            self._low = torch.tensor(spec.low, device=device)
            self._high = torch.tensor(spec.high, device=device)
            self._bounded = all(math.isfinite(x) for x in spec.low + spec.high)

    def _fused_kernels(self, wanted: bool | None, obs_dim: int, num_slots: int
                       ) -> FusedPPO | None:
        if wanted is False:
            return None
        c = self.config
        hidden = tuple(c.hidden_sizes)
        blockers = fused_blockers("ppo" if self.is_ppo else "a2c", hidden, c.activation,
                                  obs_dim, self.spec, self.device)
        if blockers:
            if wanted:
                raise ValueError("trainer.fused_kernels=true, but " + "; ".join(blockers))
            return None
        fused = FusedPPO(self.model, self.spec, obs_dim, hidden, c.activation,
                         c.normalize_obs)
        t, n = c.num_steps, num_slots
        self._fused_buffers = {name: torch.zeros((t, n), device=self.device)
                               for name in ("values", "next_values", "advantages", "returns")}
        self._adv_stats = torch.zeros(2 * c.num_minibatches, device=self.device)
        if self.spec.kind == "box":
            self._env_actions = torch.zeros((n, self.spec.head_size), device=self.device)
        return fused

    # -- roll-out --

    @torch.no_grad()
    def act(self, step: int, obs: torch.Tensor) -> torch.Tensor:
        """Sample actions for ``obs`` ``(N, D)``, store obs/action/log-prob at row
        ``step`` and return the actions to send to the env (Box: clipped to bounds)."""
        s = self.storage
        if self.fused is not None:
            shape = (obs.shape[0], self.spec.head_size)
            if self.spec.kind == "box":
                noise = torch.randn(shape, device=self.device, generator=self.generator)
                env_actions = self._env_actions
            else:
                noise = torch.rand(shape, device=self.device, generator=self.generator)
                env_actions = s.actions[step]
            self.fused.act(obs, noise, s.obs[step], s.actions[step], s.log_probs[step],
                           env_actions)
            return env_actions
        s.obs[step].copy_(obs)
        action, log_prob = self.model.act(obs, self.generator)
        s.actions[step].copy_(action)
        s.log_probs[step].copy_(log_prob)
        if self.spec.kind == "box" and self._bounded:
            return torch.clamp(action, self._low, self._high)
        return action

    def record(self, step: int, reward: torch.Tensor, terminated: torch.Tensor,
               done: torch.Tensor, final_obs: torch.Tensor) -> None:
        """Store what the env returned for row ``step`` (``(N,)`` each, ``(N, D)``)."""
        s = self.storage
        s.rewards[step].copy_(reward)
        s.terminated[step].copy_(terminated)
        s.done[step].copy_(done)
        s.final_obs[step].copy_(final_obs)

    # -- update --

    def set_progress(self, fraction_done: float) -> None:
        """Linear learning-rate annealing to 0 over the run, if enabled."""
        if self.config.anneal_lr:
            self.optimizer.set_learning_rate(
                self.config.learning_rate * max(0.0, 1.0 - fraction_done))

    def learning_rate(self) -> torch.Tensor:
        """The current learning rate, a device tensor (a copy: safe to keep)."""
        return self.optimizer.lr.clone()

    def _advantages(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        c, s = self.config, self.storage
        if self.fused is not None:
            b = self._fused_buffers
            rewards = s.rewards * c.reward_scale if c.reward_scale != 1.0 else s.rewards
            self.fused.values(s.flat(s.obs), b["values"].view(-1))
            self.fused.values(s.flat(s.final_obs), b["next_values"].view(-1))
            self.fused.gae(rewards, b["values"], b["next_values"], s.terminated, s.done,
                           c.gamma, c.gae_lambda, b["advantages"], b["returns"])
            return b["values"], b["advantages"], b["returns"]
        with torch.no_grad():
            # Values are computed for the whole roll-out at once, after it, instead of
            # one forward per step: the roll-out then runs the actor only.
            values = self.model.value(s.flat(s.obs)).reshape(s.rewards.shape)
            next_values = self.model.value(s.flat(s.final_obs)).reshape(s.rewards.shape)
            rewards = s.rewards * c.reward_scale if c.reward_scale != 1.0 else s.rewards
            advantages, returns = losses.gae_advantages(
                rewards, values, next_values, s.terminated, s.done, c.gamma, c.gae_lambda)
        return values, advantages, returns

    def update(self) -> dict[str, torch.Tensor]:
        """One update on the stored roll-out; returns device scalars to log."""
        values, advantages, returns = self._advantages()
        if self.fused is not None:
            metrics = self._fused_ppo_update(values, advantages, returns)
        elif self.is_ppo:
            metrics = self._ppo_update(values, advantages, returns)
        else:
            metrics = self._a2c_update(advantages, returns)
        # Statistics move only after the update, so the log-probs stored during the
        # roll-out and the first epoch's log-probs use the same normalisation.
        self.model.normalizer.update(self.storage.obs)
        with torch.no_grad():
            explained = 1.0 - torch.var(returns - values) / (torch.var(returns) + 1e-8)
        metrics["explained_variance"] = explained
        metrics["learning_rate"] = self.learning_rate()
        return metrics

    def _step(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        self.optimizer.step()

    def _ppo_update(self, old_values: torch.Tensor, advantages: torch.Tensor,
                    returns: torch.Tensor) -> dict[str, torch.Tensor]:
        c, s = self.config, self.storage
        obs, actions = s.flat(s.obs), s.flat(s.actions)
        old_log_probs, old_values = s.flat(s.log_probs), old_values.reshape(-1)
        advantages, returns = advantages.reshape(-1), returns.reshape(-1)
        batch = obs.shape[0]
        minibatch = max(1, batch // c.num_minibatches)
        totals = torch.zeros(6, device=self.device)
        count = 0
        for _ in range(c.update_epochs):
            order = torch.randperm(batch, device=self.device, generator=self.generator)
            epoch_kl = torch.zeros((), device=self.device)
            for start in range(0, minibatch * c.num_minibatches, minibatch):
                idx = order[start:start + minibatch]
                loss, stats = ppo_minibatch_loss(self.model, c, obs[idx], actions[idx],
                                                 old_log_probs[idx], advantages[idx],
                                                 returns[idx], old_values[idx])
                self._step(loss)
                totals += stats
                epoch_kl += stats[4] / c.num_minibatches
                count += 1
            if c.target_kl is not None and float(epoch_kl) > c.target_kl:
                break
        return _ppo_metrics(totals, count, c.num_minibatches)

    def _fused_ppo_update(self, values: torch.Tensor, advantages: torch.Tensor,
                          returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """:meth:`_ppo_update` with the fused kernels (same minibatches, same metrics)."""
        c, s, f = self.config, self.storage, self.fused
        assert f is not None
        batch = {"obs": s.flat(s.obs), "actions": s.flat(s.actions),
                 "log_probs": s.flat(s.log_probs), "advantages": advantages.reshape(-1),
                 "returns": returns.reshape(-1), "values": values.reshape(-1)}
        rows = batch["obs"].shape[0]
        minibatch = max(1, rows // c.num_minibatches)
        f.totals.zero_()
        count = 0
        for _ in range(c.update_epochs):
            order = torch.randperm(rows, device=self.device, generator=self.generator)
            if c.norm_adv:
                f.advantage_stats(batch["advantages"], order, minibatch, c.num_minibatches,
                                  self._adv_stats)
            kl_before = f.totals[4].clone() if c.target_kl is not None else None
            for m in range(c.num_minibatches):
                f.minibatch_gradient(batch, order, m * minibatch, minibatch,
                                     self._adv_stats[2 * m:2 * m + 2], c.clip_coef,
                                     c.ent_coef, c.vf_coef, c.clip_vloss, c.norm_adv)
                f.clip_gradient(c.max_grad_norm)
                self.optimizer.step()
                count += 1
            if kl_before is not None and \
                    float(f.totals[4] - kl_before) / c.num_minibatches > c.target_kl:
                break
        return _ppo_metrics(f.totals, count, c.num_minibatches)

    def _a2c_update(self, advantages: torch.Tensor, returns: torch.Tensor
                    ) -> dict[str, torch.Tensor]:
        c, s = self.config, self.storage
        log_prob, entropy, value = self.model.evaluate(s.flat(s.obs), s.flat(s.actions))
        adv = advantages.reshape(-1)
        if c.norm_adv:
            adv = losses.normalize_advantages(adv)
        policy_loss = losses.policy_gradient_loss(log_prob, adv)
        v_loss = losses.value_loss(value, returns.reshape(-1))
        entropy_mean = losses.entropy_bonus(entropy)
        loss = policy_loss - c.ent_coef * entropy_mean + c.vf_coef * v_loss
        self._step(loss)
        return {"loss": loss.detach(), "policy_loss": policy_loss.detach(),
                "value_loss": v_loss.detach(), "entropy": entropy_mean.detach()}

    # -- checkpoints --

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
