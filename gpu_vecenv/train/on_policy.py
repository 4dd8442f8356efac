"""What PPO and A2C share: an actor-critic that samples during the roll-out into a
:class:`RolloutStorage`, then GAE advantages and an optimizer step on the whole roll-out.

``N`` = the policy's slots, ``T`` = ``num_steps``, ``D`` = observation size, ``A`` = the
shape of one action. :class:`OnPolicyLearner` runs an iteration in this order:
:meth:`~OnPolicyLearner.act` and :meth:`~OnPolicyLearner.record` at each roll-out step,
then :meth:`~OnPolicyLearner.update`: :meth:`~OnPolicyLearner.advantages`, the
algorithm's :meth:`~OnPolicyLearner.optimize` (:class:`gpu_vecenv.train.ppo.PPOLearner`,
:class:`gpu_vecenv.train.a2c.A2CLearner`), the observation statistics. Nothing here
reads a tensor value on the host.

For a multi-agent env (``masked``) the rows of idle slots (an agent that left its game,
waiting for the game's reset) weigh 0 in all of that: :mod:`gpu_vecenv.train.masked`.
A row's flag is the env's ``info["active"]`` of the step that produced its observation,
so the learner carries the last step's flags over to the next roll-out step (and in its
checkpoint state). GAE needs no mask: a live row is never followed by an idle one
without ``done`` in between (an agent leaves with ``terminated``), so idle rows never
reach a live row's advantage.
"""

from __future__ import annotations

import math

import torch

from gpu_vecenv.train import distributed, losses, masked
from gpu_vecenv.train.config import A2CConfig, PPOConfig
from gpu_vecenv.train.distributions import ActionSpec
from gpu_vecenv.train.networks import ActorCritic
from gpu_vecenv.train.optimizers import Adam, RMSprop
from gpu_vecenv.train.storage import RolloutStorage, store


class OnPolicyLearner:
    """The :class:`~gpu_vecenv.train.learner.Learner` of an actor-critic trained on its
    own roll-outs; subclasses define :meth:`optimize`.

    Args:
        config: the algorithm's settings.
        obs_dim: observation size ``D``.
        spec: the action space.
        num_slots: agent slots ``N`` of this policy.
        device: where everything lives.
        generator: the device generator that sampling (and PPO's shuffling) draws from.
        masked: the env marks idle slots (``info["active"]``, multi-agent envs):
            :meth:`record` takes them and their rows weigh 0.
        compile_update: compile the loss (``trainer.compile_update``,
            :mod:`gpu_vecenv.train.compiled_loss`).
    """

    fused = None
    """the fused kernels (:class:`gpu_vecenv.train.ppo_mlp_kernels.FusedPPO`) where they run"""

    def __init__(self, config: PPOConfig | A2CConfig, obs_dim: int, spec: ActionSpec,
                 num_slots: int, device: torch.device, generator: torch.Generator,
                 masked: bool = False, compile_update: bool = False):
        self.config = config
        self.masked = masked
        self.compile_update = compile_update
        self.spec = spec
        self.device = device
        self.generator = generator
        self.steps_per_iteration = config.num_steps
        self.model = ActorCritic(obs_dim, spec, tuple(config.hidden_sizes), config.activation,
                                 config.init_log_std, config.normalize_obs).to(device)
        # Step count and learning rate live in device tensors (see optimizers.py), so the
        # update can be captured into a CUDA graph and annealing still reaches it.
        self.optimizer = self.make_optimizer()
        self.storage = RolloutStorage(config.num_steps, num_slots, obs_dim, spec.action_shape,
                                      spec.dtype, device, masked)
        # Whether each slot's next observation is live (all are after a reset).
        self._live = torch.ones(num_slots, dtype=torch.bool, device=device) if masked else None
        if spec.kind == "box":
            self._low = torch.tensor(spec.low, device=device)
            self._high = torch.tensor(spec.high, device=device)
            self._bounded = all(math.isfinite(x) for x in spec.low + spec.high)

    def make_optimizer(self) -> Adam | RMSprop:
        """Adam over the model's parameters (A2C may ask for RMSprop)."""
        return Adam(self.model.parameters(), self.config.learning_rate, eps=1e-5)

    def begin_iteration(self, global_step: int, fraction_done: float) -> None:
        """Linear learning-rate annealing to 0 over the run, if enabled."""
        if self.config.anneal_lr:
            self.optimizer.set_learning_rate(
                self.config.learning_rate * max(0.0, 1.0 - fraction_done))

    # -- roll-out --

    @torch.no_grad()
    def act(self, step: int, obs: torch.Tensor) -> torch.Tensor:
        """Sample actions for ``obs`` ``(N, D)`` (or a block ``(games, agents, D)``,
        :func:`~gpu_vecenv.train.storage.store`), store obs/action/log-prob at row
        ``step`` and return the actions ``(N, *A)`` to send to the env (Box: clipped to
        bounds)."""
        s = self.storage
        store(s.obs[step], obs)
        action, log_prob = self.model.act(s.obs[step], self.generator)
        s.actions[step].copy_(action)
        s.log_probs[step].copy_(log_prob)
        if self.spec.kind == "box" and self._bounded:
            return torch.clamp(action, self._low, self._high)
        return action

    def record(self, step: int, reward: torch.Tensor, terminated: torch.Tensor,
               done: torch.Tensor, final_obs: torch.Tensor,
               active: torch.Tensor | None = None) -> None:
        """Store what the env returned for row ``step`` (``(N,)`` each, ``(N, D)``; or
        blocks ``(games, agents, ...)``, :func:`~gpu_vecenv.train.storage.store`);
        ``active`` ``(N,)`` bool: which slots' new observations are live (a masked
        learner's ``info["active"]``; required there, refused elsewhere)."""
        s = self.storage
        if (active is None) == self.masked:
            raise ValueError("record: pass active (info['active']) exactly when the learner "
                             f"is masked (masked={self.masked})")
        if active is not None:
            s.mask[step].copy_(self._live)
            store(self._live, active)
        store(s.rewards[step], reward)
        store(s.terminated[step], terminated)
        store(s.done[step], done)
        store(s.final_obs[step], final_obs)

    # -- update --

    def ready(self, global_step: int) -> bool:
        """Always: every roll-out is followed by an update."""
        return True

    def update(self) -> dict[str, torch.Tensor]:
        """One update on the stored roll-out; returns device scalars to log."""
        values, advantages, returns = self.advantages()
        metrics = self.optimize(values, advantages, returns)
        # Statistics move only after the update, so the log-probs stored during the
        # roll-out and the first epoch's log-probs use the same normalisation.
        mask = self.storage.mask
        self.model.normalizer.update(self.storage.obs, mask)
        with torch.no_grad():
            if mask is not None:
                explained = masked.explained_variance(returns, values, mask)
                metrics["live_fraction"] = mask.mean()
            elif distributed.active():  # over all ranks' samples
                explained = 1.0 - (distributed.mean_var(returns - values)[1]
                                   / (distributed.mean_var(returns)[1] + 1e-8))
            else:
                explained = 1.0 - torch.var(returns - values) / (torch.var(returns) + 1e-8)
        metrics["explained_variance"] = explained
        metrics["learning_rate"] = self.learning_rate()
        return metrics

    def advantages(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(values, advantages, returns)`` of the stored roll-out, ``(T, N)`` each:
        GAE(lambda) over the (scaled) rewards, bootstrapping from ``final_obs`` (where an
        episode was truncated, only with ``bootstrap_truncated``)."""
        c, s = self.config, self.storage
        with torch.no_grad():
            # Values are computed for the whole roll-out at once, after it, instead of
            # one forward per step: the roll-out then runs the actor only.
            values = self.model.value(s.flat(s.obs)).reshape(s.rewards.shape)
            next_values = self.model.value(s.flat(s.final_obs)).reshape(s.rewards.shape)
            rewards = s.rewards * c.reward_scale if c.reward_scale != 1.0 else s.rewards
            advantages, returns = losses.gae_advantages(
                rewards, values, next_values, self.no_bootstrap(), s.done, c.gamma,
                c.gae_lambda)
        return values, advantages, returns

    def no_bootstrap(self) -> torch.Tensor:
        """``(T, N)`` bool: the rows whose target does not bootstrap from ``final_obs``:
        terminated ones, and with ``bootstrap_truncated`` false every episode end."""
        s = self.storage
        return s.terminated if self.config.bootstrap_truncated else s.done

    def optimize(self, values: torch.Tensor, advantages: torch.Tensor,
                 returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """The algorithm's optimizer steps on the roll-out (``(T, N)`` each); returns
        device scalars to log."""
        raise NotImplementedError

    def step(self, loss: torch.Tensor) -> None:
        """One optimizer step on ``loss``, gradients clipped to ``max_grad_norm``."""
        self.optimizer.zero_grad()
        loss.backward()
        distributed.average_gradients(self.model.parameters())  # data-parallel runs only
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        self.optimizer.step()

    def learning_rate(self) -> torch.Tensor:
        """The current learning rate, a device tensor (a copy: safe to keep)."""
        return self.optimizer.lr.clone()

    # -- checkpoints --

    def state_dict(self) -> dict:
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        if self._live is not None:
            state["live"] = self._live.clone()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self._live is not None:
            # Checkpoints from before masking: every slot counts as live until it
            # leaves (at most one roll-out of idle rows is counted).
            live = state.get("live")
            self._live.copy_(live if live is not None else torch.ones_like(self._live))
