"""Action distributions for Discrete, MultiDiscrete and Box spaces, as plain functions.

Sampling takes an explicit ``torch.Generator`` on the device, so a run's actions are a
function of its seed and a checkpoint can restore the sampler exactly (the
``torch.distributions`` classes draw from the global generator). ``B`` is the batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import gymnasium as gym
import torch

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class ActionSpec:
    """What a policy head must produce for one action space.

    ``kind``: ``"discrete"`` (actions ``(B,)`` int64), ``"multidiscrete"`` (``(B, d)``
    int64) or ``"box"`` (``(B, d)`` float32). ``nvec``: category counts (one entry for
    discrete). ``low``/``high``: Box bounds as tuples.
    """

    kind: str
    nvec: tuple[int, ...] = ()
    start: tuple[int, ...] = ()
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()

    @property
    def head_size(self) -> int:
        """Outputs of the actor's last layer (logits or means)."""
        return sum(self.nvec) if self.kind != "box" else len(self.low)

    @property
    def action_shape(self) -> tuple[int, ...]:
        """Shape of one action: ``()`` discrete, ``(d,)`` otherwise."""
        if self.kind == "discrete":
            return ()
        return (len(self.nvec),) if self.kind == "multidiscrete" else (len(self.low),)

    @property
    def dtype(self) -> torch.dtype:
        return torch.float32 if self.kind == "box" else torch.int64

    @classmethod
    def from_space(cls, space: gym.Space) -> ActionSpec:
        if isinstance(space, gym.spaces.Discrete):
            return cls("discrete", nvec=(int(space.n),), start=(int(space.start),))
        if isinstance(space, gym.spaces.MultiDiscrete):
            if len(space.shape) != 1:
                raise TypeError(f"MultiDiscrete action spaces must be 1-D, got {space}")
            return cls("multidiscrete", nvec=tuple(int(n) for n in space.nvec),
                       start=tuple(int(s) for s in space.start))
        if isinstance(space, gym.spaces.Box):
            if len(space.shape) != 1:
                raise TypeError(f"Box action spaces must be 1-D, got {space}")
            return cls("box", low=tuple(float(x) for x in space.low),
                       high=tuple(float(x) for x in space.high))
        raise TypeError(f"unsupported action space {space}")


def _split(logits: torch.Tensor, spec: ActionSpec) -> list[torch.Tensor]:
    return list(torch.split(logits, list(spec.nvec), dim=-1))


def _gumbel_argmax(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A sample of the categorical of ``logits`` (Gumbel-max); -1 (an invalid action, which
    the env reports) where a row holds a NaN logit, as from a diverged network."""
    u = torch.rand(logits.shape, device=logits.device, generator=generator)
    u = u.clamp_(min=torch.finfo(u.dtype).tiny)
    # max propagates NaN: a row with a NaN logit has a NaN maximum (its index, the first
    # maximal one as argmax's, is replaced)
    best, index = torch.max(logits - torch.log(-torch.log(u)), dim=-1)
    return torch.where(torch.isnan(best), -1, index)


def _offset(index: torch.Tensor, spec: ActionSpec, sign: int = 1) -> torch.Tensor:
    # Starts are almost always 0: skip the (host-to-device) offset tensor then.
    if not any(spec.start):
        return index
    return index + sign * index.new_tensor(spec.start)


def sample(
    spec: ActionSpec,
    params: torch.Tensor,
    log_std: torch.Tensor | None,
    generator: torch.Generator,
) -> torch.Tensor:
    """Draw actions. ``params``: logits ``(B, sum(nvec))`` or means ``(B, d)``;
    ``log_std``: ``(d,)`` for Box. Returns actions (unclipped for Box, offset by the
    space's ``start`` for discrete kinds)."""
    if spec.kind == "box":
        noise = torch.randn(params.shape, device=params.device, generator=generator)
        return params + noise * torch.exp(log_std)
    if spec.kind == "discrete":
        return _gumbel_argmax(params, generator) + spec.start[0]
    parts = [_gumbel_argmax(p, generator) for p in _split(params, spec)]
    return _offset(torch.stack(parts, dim=-1), spec)


def mode(spec: ActionSpec, params: torch.Tensor) -> torch.Tensor:
    """The most likely action (deterministic evaluation)."""
    if spec.kind == "box":
        return params
    if spec.kind == "discrete":
        return torch.argmax(params, dim=-1) + spec.start[0]
    parts = [torch.argmax(p, dim=-1) for p in _split(params, spec)]
    return _offset(torch.stack(parts, dim=-1), spec)


def log_prob_and_entropy(
    spec: ActionSpec,
    params: torch.Tensor,
    log_std: torch.Tensor | None,
    action: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log pi(action), entropy)``, each ``(B,)``; MultiDiscrete and Box dimensions are
    independent, so both sum over dimensions."""
    log_prob, entropy = _log_prob(spec, params, log_std, action, with_entropy=True)
    return log_prob, cast(torch.Tensor, entropy)


def log_prob(
    spec: ActionSpec,
    params: torch.Tensor,
    log_std: torch.Tensor | None,
    action: torch.Tensor,
) -> torch.Tensor:
    """``log pi(action)`` ``(B,)``, the same values as :func:`log_prob_and_entropy`'s,
    without computing the entropy (a roll-out step needs only this: per discrete
    dimension four kernels fewer)."""
    return _log_prob(spec, params, log_std, action, with_entropy=False)[0]


def _log_prob(spec: ActionSpec, params: torch.Tensor, log_std: torch.Tensor | None,
              action: torch.Tensor, with_entropy: bool
              ) -> tuple[torch.Tensor, torch.Tensor | None]:
    if spec.kind == "box":
        std = torch.exp(log_std)
        z = (action - params) / std
        log_prob = (-0.5 * z * z - log_std - _LOG_SQRT_2PI).sum(-1)
        if not with_entropy:
            return log_prob, None
        entropy = (0.5 + _LOG_SQRT_2PI + log_std).sum(-1).expand(params.shape[0])
        return log_prob, entropy
    if spec.kind == "discrete":
        index = (action - spec.start[0]).unsqueeze(-1)
    else:
        index = _offset(action, spec, sign=-1)
    log_prob = torch.zeros(params.shape[0], device=params.device)
    entropy = torch.zeros(params.shape[0], device=params.device) if with_entropy else None
    for d, logits in enumerate(_split(params, spec)):
        logp_all = torch.log_softmax(logits, dim=-1)
        # Clamped: the invalid action sampled from NaN logits must not index out of range
        # (its log-probability is NaN through the logits anyway).
        chosen = index[:, d:d + 1].clamp(0, logits.shape[-1] - 1)
        log_prob = log_prob + logp_all.gather(-1, chosen).squeeze(-1)
        if entropy is not None:
            entropy = entropy - (torch.exp(logp_all) * logp_all).sum(-1)
    return log_prob, entropy
