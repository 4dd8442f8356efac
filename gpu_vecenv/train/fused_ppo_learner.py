"""PPO through the fused CUDA kernels of :mod:`gpu_vecenv.train.ppo_mlp_kernels`: the same
roll-out, advantages and minibatches as :class:`~gpu_vecenv.train.ppo.PPOLearner`, each
phase in a few kernel launches (sampling, values + GAE, gradient + clip per minibatch).

The kernels sum in another order than cuBLAS: results agree with the torch path to float
rounding, and a fused run is deterministic. ``N``, ``T`` as in :mod:`.on_policy`.
"""

from __future__ import annotations

import torch

from gpu_vecenv.train import distributed
from gpu_vecenv.train.config import A2CConfig, PPOConfig
from gpu_vecenv.train.distributions import ActionSpec
from gpu_vecenv.train.ppo import PPOLearner, ppo_metrics
from gpu_vecenv.train.ppo_mlp_kernels import FusedPPO, fused_blockers, mma_precision


def fused_kernels_apply(wanted: bool | None, config: PPOConfig | A2CConfig, obs_dim: int,
                        spec: ActionSpec, device: torch.device, masked: bool = False) -> bool:
    """Whether a policy runs on the fused kernels (``trainer.fused_kernels`` is
    ``wanted``: ``None`` = where they apply; ``True`` = they must, else a ``ValueError``
    says why not). ``masked``: the policy's slots have idle rows to weigh 0."""
    if wanted is False:
        return False
    algo = "ppo" if isinstance(config, PPOConfig) else "a2c"
    blockers = fused_blockers(algo, tuple(config.hidden_sizes), config.activation, obs_dim,
                              spec, device, masked)
    if blockers and wanted:
        raise ValueError("trainer.fused_kernels=true, but " + "; ".join(blockers))
    return not blockers


class FusedPPOLearner(PPOLearner):
    """:class:`~gpu_vecenv.train.ppo.PPOLearner` with sampling, advantages and the
    minibatch gradient in the fused kernels (same arguments, plus ``matmul_precision``:
    the kernels' products as :func:`~gpu_vecenv.train.ppo_mlp_kernels.mma_precision`
    maps it; ``None``: by torch's current setting)."""

    fused: FusedPPO

    def __init__(self, config: PPOConfig, obs_dim: int, spec: ActionSpec, num_slots: int,
                 device: torch.device, generator: torch.Generator,
                 matmul_precision: str | None = None):
        super().__init__(config, obs_dim, spec, num_slots, device, generator)
        c, t, n = config, config.num_steps, num_slots
        # Flattens the model's parameters in place (the optimizer keeps the same objects);
        # tiles of 128 samples where every multiprocessor gets several per minibatch.
        self.fused = FusedPPO(self.model, spec, obs_dim, tuple(c.hidden_sizes), c.activation,
                              c.normalize_obs, mma=mma_precision(matmul_precision),
                              minibatch_rows=max(1, t * n // c.num_minibatches))
        self._buffers = {name: torch.zeros((t, n), device=device)
                         for name in ("values", "next_values", "advantages", "returns")}
        self._adv_stats = torch.zeros(2 * c.num_minibatches, device=device)
        # Every epoch's minibatch order, drawn on a side stream while the values, GAE and
        # the earlier epochs run (see _draw_orders).
        self._order_stream = torch.cuda.Stream(device)
        self._orders: list[tuple[torch.Tensor, torch.cuda.Event]] | None = None
        if spec.kind == "box":
            self._env_actions = torch.zeros((n, spec.head_size), device=device)

    @torch.no_grad()
    def act(self, step: int, obs: torch.Tensor) -> torch.Tensor:
        """:meth:`PPOLearner.act` in one kernel (noise drawn from the same generator);
        a block ``(games, agents, D)`` is made contiguous first (the kernel reads rows)."""
        s = self.storage
        obs = obs.reshape(-1, obs.shape[-1])
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

    def advantages(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`PPOLearner.advantages` in three kernels (equal bit for bit); first
        draws the minibatch orders of the :meth:`optimize` that follows
        (:meth:`_draw_orders`)."""
        c, s, b = self.config, self.storage, self._buffers
        self._draw_orders(s.obs.shape[0] * s.obs.shape[1])
        rewards = s.rewards * c.reward_scale if c.reward_scale != 1.0 else s.rewards
        self.fused.values(s.flat(s.obs), b["values"].view(-1))
        self.fused.values(s.flat(s.final_obs), b["next_values"].view(-1))
        self.fused.gae(rewards, b["values"], b["next_values"], self.no_bootstrap(), s.done,
                       c.gamma, c.gae_lambda, b["advantages"], b["returns"])
        return b["values"], b["advantages"], b["returns"]

    def optimize(self, values: torch.Tensor, advantages: torch.Tensor,
                 returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """:meth:`PPOLearner.optimize` with the fused gradient (same minibatches, same
        metrics)."""
        c, s, f = self.config, self.storage, self.fused
        batch = {"obs": s.flat(s.obs), "actions": s.flat(s.actions),
                 "log_probs": s.flat(s.log_probs), "advantages": advantages.reshape(-1),
                 "returns": returns.reshape(-1), "values": values.reshape(-1)}
        rows = batch["obs"].shape[0]
        minibatch = max(1, rows // c.num_minibatches)
        f.totals.zero_()
        count = 0
        orders, self._orders = self._orders, None
        if orders is not None and len(orders[0][0]) != rows:
            raise ValueError(f"the drawn minibatch orders are of {len(orders[0][0])} rows, "
                             f"the batch has {rows}")
        for epoch in range(c.update_epochs):
            if orders is None:
                order = torch.randperm(rows, device=self.device, generator=self.generator)
            else:
                order, drawn = orders[epoch]
                torch.cuda.current_stream(self.device).wait_event(drawn)
            if c.norm_adv and distributed.active():
                self._global_advantage_stats(batch["advantages"], order, minibatch)
            elif c.norm_adv:
                f.advantage_stats(batch["advantages"], order, minibatch, c.num_minibatches,
                                  self._adv_stats)
            kl_before = f.totals[4].clone() if c.target_kl is not None else None
            for m in range(c.num_minibatches):
                f.minibatch_gradient(batch, order, m * minibatch, minibatch,
                                     self._adv_stats[2 * m:2 * m + 2], c.clip_coef,
                                     c.ent_coef, c.vf_coef, c.clip_vloss, c.norm_adv)
                if distributed.active():
                    # The kernel's clip reads the squared norm of this rank's gradient,
                    # summed by ppo_reduce_grads: clip the averaged one with torch.
                    distributed.all_reduce_mean_(f.flat_grads)
                    torch.nn.utils.clip_grad_norm_([f.flat_grads], c.max_grad_norm)
                else:
                    f.clip_gradient(c.max_grad_norm)
                self.optimizer.step()
                count += 1
            if kl_before is not None and float(distributed.all_reduce_mean_(
                    f.totals[4] - kl_before)) / c.num_minibatches > c.target_kl:
                break
        return ppo_metrics(f.totals, count, c.num_minibatches)

    def _draw_orders(self, rows: int) -> None:
        """Draw every epoch's ``torch.randperm(rows)`` now, on a side stream, each with an
        event that :meth:`optimize` waits for before using it: the permutations (a radix
        sort each, ~40 us at 32,768 rows on an H200) then run beside the values, GAE and
        the earlier epochs' kernels instead of before each epoch. The generator yields the
        same permutations as drawing each at its epoch (nothing draws from it in between),
        so results are the same bit for bit. Not with ``target_kl``: an early stop would
        leave permutations drawn that the eager order never draws."""
        self._orders = None
        if self.config.target_kl is not None:
            return
        main, side = torch.cuda.current_stream(self.device), self._order_stream
        side.wait_stream(main)  # also: the last update's reads of earlier orders are done
        orders = []
        with torch.cuda.stream(side):
            for _ in range(self.config.update_epochs):
                order = torch.randperm(rows, device=self.device, generator=self.generator)
                drawn = torch.cuda.Event()
                drawn.record(side)
                orders.append((order, drawn))
        self._orders = orders

    def _global_advantage_stats(self, advantages: torch.Tensor, order: torch.Tensor,
                                size: int) -> None:
        """What :meth:`FusedPPO.advantage_stats` writes (each minibatch's advantage mean
        and unbiased std), over minibatch ``m`` of every rank (data-parallel runs)."""
        count = self.config.num_minibatches
        rows = advantages[order[:count * size]].reshape(count, size)
        mean, var, _ = distributed.mean_var(rows, dim=1)
        self._adv_stats.view(count, 2).copy_(torch.stack([mean, var.sqrt()], dim=1))
