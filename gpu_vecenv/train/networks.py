"""Policy and value networks: MLPs with an optional running observation normalizer.

``B`` is the batch, ``D`` the observation size. All state (weights, normalizer
statistics) lives in parameters and buffers, so ``state_dict()`` is the whole model.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from gpu_vecenv.train import distributed, distributions, masked
from gpu_vecenv.train.distributions import ActionSpec

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}


def mlp(in_size: int, hidden: tuple[int, ...], out_size: int, activation: str,
        out_gain: float) -> nn.Sequential:
    """Linear layers with orthogonal initialisation (gain sqrt(2) inside, ``out_gain``
    on the last layer) and zero biases."""
    layers: list[nn.Module] = []
    sizes = [in_size, *hidden]
    for a, b in zip(sizes, sizes[1:], strict=False):
        layers += [_linear(a, b, math.sqrt(2.0)), _ACTIVATIONS[activation]()]
    layers.append(_linear(sizes[-1], out_size, out_gain))
    return nn.Sequential(*layers)


def _linear(a: int, b: int, gain: float) -> nn.Linear:
    layer = nn.Linear(a, b)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class ObsNormalizer(nn.Module):
    """Running mean/variance of observations (parallel Welford update, on the device).

    Disabled, it is the identity. Shapes: ``mean``/``var`` ``(D,)``, ``count`` ``()``.
    """

    def __init__(self, obs_dim: int, enabled: bool, clip: float = 10.0):
        super().__init__()
        self.enabled = enabled
        self.clip = clip
        self.register_buffer("mean", torch.zeros(obs_dim))
        self.register_buffer("var", torch.ones(obs_dim))
        self.register_buffer("count", torch.tensor(1e-4))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return obs
        return torch.clamp((obs - self.mean) * torch.rsqrt(self.var + 1e-8),
                           -self.clip, self.clip)

    @torch.no_grad()
    def update(self, obs: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Fold a batch ``(..., D)`` into the statistics; with ``mask`` (``obs.shape[:-1]``,
        1 = live, :mod:`gpu_vecenv.train.masked`) only its live rows."""
        if not self.enabled:
            return
        batch = obs.reshape(-1, obs.shape[-1])
        if mask is not None:
            batch_mean, batch_var, n = masked.mean_var(batch, mask.reshape(-1), dim=0,
                                                       unbiased=False)
        elif distributed.active():  # every rank folds in the same batch: all ranks' rows
            batch_mean, batch_var, n = distributed.mean_var(batch, dim=0, unbiased=False)
        else:
            batch_mean = batch.mean(0)
            batch_var = batch.var(0, unbiased=False)
            n = float(batch.shape[0])
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean.add_(delta * n / total)
        m2 = self.var * self.count + batch_var * n + delta * delta * self.count * n / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs (PPO, A2C) sharing one observation normalizer.

    The actor outputs logits (Discrete, MultiDiscrete: ``(B, sum(nvec))``) or means
    (Box: ``(B, d)``, with a learned state-free ``log_std`` ``(d,)``).
    """

    def __init__(self, obs_dim: int, spec: ActionSpec, hidden_sizes: tuple[int, ...],
                 activation: str, init_log_std: float = 0.0, normalize_obs: bool = False):
        super().__init__()
        self.spec = spec
        self.normalizer = ObsNormalizer(obs_dim, normalize_obs)
        self.actor = mlp(obs_dim, hidden_sizes, spec.head_size, activation, 0.01)
        self.critic = mlp(obs_dim, hidden_sizes, 1, activation, 1.0)
        if spec.kind == "box":
            self.log_std = nn.Parameter(torch.full((spec.head_size,), float(init_log_std)))
        else:
            self.log_std = None

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)``: ``(B, D)`` -> ``(B,)``."""
        return self.critic(self.normalizer(obs)).squeeze(-1)

    def act(self, obs: torch.Tensor, generator: torch.Generator
            ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample ``(action, log_prob)`` for ``(B, D)`` observations."""
        params = self.actor(self.normalizer(obs))
        action = distributions.sample(self.spec, params, self.log_std, generator)
        log_prob = distributions.log_prob(self.spec, params, self.log_std, action)
        return action, log_prob

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy, value)`` of stored actions, each ``(B,)``."""
        x = self.normalizer(obs)
        params = self.actor(x)
        log_prob, entropy = distributions.log_prob_and_entropy(self.spec, params,
                                                               self.log_std, action)
        return log_prob, entropy, self.critic(x).squeeze(-1)

    def deterministic_action(self, obs: torch.Tensor) -> torch.Tensor:
        """The mode of the policy (evaluation)."""
        return distributions.mode(self.spec, self.actor(self.normalizer(obs)))


class DeterministicActorCritic(nn.Module):
    """DDPG's actor ``mu(s)`` (tanh, scaled to the Box bounds) and critic ``Q(s, a)``,
    with target copies, sharing one observation normalizer."""

    def __init__(self, obs_dim: int, spec: ActionSpec, hidden_sizes: tuple[int, ...],
                 activation: str, normalize_obs: bool = False):
        super().__init__()
        if spec.kind != "box":
            raise TypeError("DDPG needs a Box action space")
        self.spec = spec
        act_dim = spec.head_size
        self.normalizer = ObsNormalizer(obs_dim, normalize_obs)
        self.actor = mlp(obs_dim, hidden_sizes, act_dim, activation, 0.01)
        self.critic = mlp(obs_dim + act_dim, hidden_sizes, 1, activation, 1.0)
        self.target_actor = mlp(obs_dim, hidden_sizes, act_dim, activation, 0.01)
        self.target_critic = mlp(obs_dim + act_dim, hidden_sizes, 1, activation, 1.0)
        self.target_actor.load_state_dict(self.actor.state_dict())
        self.target_critic.load_state_dict(self.critic.state_dict())
        self.target_actor.requires_grad_(False)
        self.target_critic.requires_grad_(False)
        low = torch.tensor(spec.low)
        high = torch.tensor(spec.high)
        self.register_buffer("action_center", (high + low) / 2)
        self.register_buffer("action_scale", (high - low) / 2)

    def _mu(self, net: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return self.action_center + self.action_scale * torch.tanh(net(x))

    def action(self, obs: torch.Tensor, target: bool = False) -> torch.Tensor:
        """``mu(obs)`` in the action bounds: ``(B, D)`` -> ``(B, d)``."""
        return self._mu(self.target_actor if target else self.actor, self.normalizer(obs))

    def q(self, obs: torch.Tensor, action: torch.Tensor, target: bool = False
          ) -> torch.Tensor:
        """``Q(obs, action)``: ``(B,)``; the action enters scaled to [-1, 1]."""
        net = self.target_critic if target else self.critic
        scaled = (action - self.action_center) / self.action_scale
        return net(torch.cat([self.normalizer(obs), scaled], dim=-1)).squeeze(-1)

    def deterministic_action(self, obs: torch.Tensor) -> torch.Tensor:
        return self.action(obs)
