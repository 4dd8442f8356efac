"""DDPG for one policy: exploration noise, the device replay buffer and the updates.

``N`` = the policy's agent slots, ``d`` = action size. An iteration of the trainer is
``train_frequency`` vector steps followed by ``gradient_steps`` updates.
"""

from __future__ import annotations

import math

import torch

from gpu_vecenv.train import distributed, losses
from gpu_vecenv.train.config import DDPGConfig
from gpu_vecenv.train.distributions import ActionSpec
from gpu_vecenv.train.networks import DeterministicActorCritic
from gpu_vecenv.train.optimizers import Adam
from gpu_vecenv.train.storage import ReplayBuffer

_OU_DT = 1e-2  # time step of the Ornstein-Uhlenbeck process (as in SB3 / baselines)


class DDPGLearner:
    """Deterministic actor, Q critic, target copies with soft updates, replay on device:
    the :class:`~gpu_vecenv.train.learner.Learner` of ``DDPGConfig``."""

    def __init__(self, config: DDPGConfig, obs_dim: int, spec: ActionSpec, num_slots: int,
                 device: torch.device, generator: torch.Generator):
        if spec.kind != "box":
            raise ValueError(f"DDPG needs a Box action space; this env's actions are "
                             f"{spec.kind} (use ppo or a2c)")
        if not all(math.isfinite(x) for x in spec.low + spec.high):
            raise ValueError("DDPG needs finite action bounds")
        self.config = config
        self.spec = spec
        self.device = device
        self.generator = generator
        self.model = DeterministicActorCritic(obs_dim, spec, tuple(config.hidden_sizes),
                                              config.activation, config.normalize_obs
                                              ).to(device)
        self.actor_optimizer = Adam(self.model.actor.parameters(), config.actor_learning_rate)
        self.critic_optimizer = Adam(self.model.critic.parameters(),
                                     config.critic_learning_rate)
        self.replay = ReplayBuffer(config.buffer_size, num_slots, obs_dim, spec.head_size,
                                   device)
        self.ou_state = torch.zeros((num_slots, spec.head_size), device=device)
        self.updates = 0
        self.steps_per_iteration = config.train_frequency
        # Uniform random actions; begin_iteration sets it (a new run is at step 0).
        self.warming_up = config.learning_starts > 0
        self._last_obs: torch.Tensor | None = None
        self._last_action: torch.Tensor | None = None

    def begin_iteration(self, global_step: int, fraction_done: float) -> None:
        """Explore uniformly while ``global_step < learning_starts`` (learning rates stay
        constant)."""
        self.warming_up = global_step < self.config.learning_starts

    # -- acting --

    @torch.no_grad()
    def act(self, step: int, obs: torch.Tensor) -> torch.Tensor:
        """Actions for ``obs`` ``(N, D)``: uniform in the bounds during the warm-up,
        else ``mu(s)`` plus noise, clipped to the bounds (``step`` is unused)."""
        m = self.model
        shape = (obs.shape[0], self.spec.head_size)
        if self.warming_up:
            u = torch.rand(shape, device=self.device, generator=self.generator)
            action = m.action_center + m.action_scale * (2.0 * u - 1.0)
        else:
            c = self.config
            noise = torch.randn(shape, device=self.device, generator=self.generator)
            if c.noise == "ou":
                self.ou_state += (-c.ou_theta * self.ou_state * _OU_DT
                                  + c.noise_std * math.sqrt(_OU_DT) * noise)
                noise = self.ou_state
            else:
                noise = c.noise_std * noise
            action = m.action(obs) + m.action_scale * noise
            action = torch.max(torch.min(action, m.action_center + m.action_scale),
                               m.action_center - m.action_scale)
        self._last_obs = obs.clone()
        self._last_action = action
        return action

    def record(self, step: int, reward: torch.Tensor, terminated: torch.Tensor,
               done: torch.Tensor, final_obs: torch.Tensor,
               active: torch.Tensor | None = None) -> None:
        """Store the transition of the last ``act`` (``final_obs``: true next obs);
        ``step`` (the row within the iteration) is unused. DDPG is never built for a
        multi-agent env (:func:`~gpu_vecenv.train.learner.build_learner`): ``active``
        must be ``None``."""
        if active is not None:
            raise ValueError("DDPG does not mask idle multi-agent slots (active given)")
        self.replay.add(self._last_obs, self._last_action, reward, final_obs, terminated)
        self.ou_state.mul_((~done).unsqueeze(-1).to(self.ou_state.dtype))
        self.model.normalizer.update(self._last_obs)

    # -- learning --

    def ready(self, global_step: int) -> bool:
        """Once ``global_step`` (env steps after this roll-out) reaches ``learning_starts``
        and the buffer holds a batch (host integers: no sync)."""
        return (global_step >= self.config.learning_starts
                and self.replay.size >= self.config.batch_size)

    def update(self) -> dict[str, torch.Tensor]:
        """``gradient_steps`` critic steps (and actor/target steps every
        ``policy_delay``); returns device scalars to log."""
        c, m = self.config, self.model
        critic_total = torch.zeros((), device=self.device)
        actor_total = torch.zeros((), device=self.device)
        q_total = torch.zeros((), device=self.device)
        actor_steps = 0
        for _ in range(c.gradient_steps):
            obs, action, reward, next_obs, terminated = self.replay.sample(c.batch_size,
                                                                           self.generator)
            with torch.no_grad():
                next_q = m.q(next_obs, m.action(next_obs, target=True), target=True)
                target = losses.ddpg_critic_target(reward * c.reward_scale, next_q,
                                                   terminated, c.gamma)
            q = m.q(obs, action)
            critic_loss = losses.ddpg_critic_loss(q, target)
            self._step(self.critic_optimizer, critic_loss, m.critic)
            critic_total += critic_loss.detach()
            q_total += q.detach().mean()
            self.updates += 1
            if self.updates % c.policy_delay == 0:
                actor_loss = losses.ddpg_actor_loss(m.q(obs, m.action(obs)))
                self._step(self.actor_optimizer, actor_loss, m.actor)
                actor_total += actor_loss.detach()
                actor_steps += 1
                losses.soft_update(m.target_actor, m.actor, c.tau)
                losses.soft_update(m.target_critic, m.critic, c.tau)
        steps = max(1, c.gradient_steps)
        return {"critic_loss": critic_total / steps,
                "actor_loss": actor_total / max(1, actor_steps), "q_mean": q_total / steps}

    def _step(self, optimizer: Adam, loss: torch.Tensor,
              net: torch.nn.Module) -> None:
        optimizer.zero_grad()
        loss.backward()
        distributed.average_gradients(net.parameters())  # data-parallel runs only
        if self.config.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(net.parameters(), self.config.max_grad_norm)
        optimizer.step()

    # -- checkpoints --

    def state_dict(self) -> dict:
        state = {"model": self.model.state_dict(),
                 "actor_optimizer": self.actor_optimizer.state_dict(),
                 "critic_optimizer": self.critic_optimizer.state_dict(),
                 "ou_state": self.ou_state.clone(), "updates": self.updates}
        if self.config.save_replay_buffer:
            state["replay"] = self.replay.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.ou_state.copy_(state["ou_state"])
        self.updates = int(state["updates"])
        if "replay" in state:
            self.replay.load_state_dict(state["replay"])
