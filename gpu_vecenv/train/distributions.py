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


def _blocks(logits: torch.Tensor, spec: ActionSpec) -> torch.Tensor | None:
    """``logits`` ``(B, sum(nvec))`` as ``(B, d, n)`` where every dimension has ``n``
    categories (Discrete; Tag's MultiDiscrete): one kernel then serves all dimensions.
    ``None`` for unequal sizes."""
    if len(set(spec.nvec)) != 1:
        return None
    return logits.unflatten(-1, (len(spec.nvec), spec.nvec[0]))


def _gumbel_argmax(logits: torch.Tensor, spec: ActionSpec, generator: torch.Generator
                   ) -> torch.Tensor:
    """A sample ``(B, d)`` of each dimension's categorical (Gumbel-max) from ``logits``
    ``(B, sum(nvec))``; -1 (an invalid action, which the env reports) in a dimension
    whose logits hold a NaN, as from a diverged network.

    One uniform number per logit, drawn in one call in the logits' layout (the fused
    kernels' noise, :mod:`gpu_vecenv.train.ppo_mlp_kernels`, is laid out the same)."""
    u = torch.rand(logits.shape, device=logits.device, generator=generator)
    u = u.clamp_(min=torch.finfo(u.dtype).tiny)
    scores = logits - torch.log(-torch.log(u))
    # max propagates NaN: a dimension with a NaN logit has a NaN maximum (its index, the
    # first maximal one as argmax's, is replaced)
    blocks = _blocks(scores, spec)
    if blocks is not None:
        best, index = torch.max(blocks, dim=-1)
    else:
        parts = [torch.max(p, dim=-1) for p in _split(scores, spec)]
        best = torch.stack([b for b, _ in parts], dim=-1)
        index = torch.stack([i for _, i in parts], dim=-1)
    return torch.where(torch.isnan(best), -1, index)


def _offset(index: torch.Tensor, spec: ActionSpec, sign: int = 1) -> torch.Tensor:
    """``index`` ``(B, d)`` (Discrete: ``(B,)``) plus ``sign`` times the space's start."""
    # Starts are almost always 0: skip the addition (and the offset tensor) then.
    if not any(spec.start):
        return index
    if spec.kind == "discrete":
        return index + sign * spec.start[0]
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
    index = _gumbel_argmax(params, spec, generator)
    return _offset(index.squeeze(-1) if spec.kind == "discrete" else index, spec)


def mode(spec: ActionSpec, params: torch.Tensor) -> torch.Tensor:
    """The most likely action (deterministic evaluation)."""
    if spec.kind == "box":
        return params
    if spec.kind == "discrete":
        return _offset(torch.argmax(params, dim=-1), spec)
    blocks = _blocks(params, spec)
    if blocks is not None:
        return _offset(torch.argmax(blocks, dim=-1), spec)
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
    index = _offset(action, spec, sign=-1)
    if spec.kind == "discrete":
        index = index.unsqueeze(-1)
    # Clamped: the invalid action sampled from NaN logits must not index out of range
    # (its log-probability is NaN through the logits anyway).
    blocks = _blocks(params, spec)
    if blocks is not None:  # all dimensions at once, summed as the loop below sums them
        logp_all = torch.log_softmax(blocks, dim=-1)
        chosen = index.clamp(0, blocks.shape[-1] - 1).unsqueeze(-1)
        log_prob = logp_all.gather(-1, chosen).squeeze(-1).sum(-1)
        if not with_entropy:
            return log_prob, None
        return log_prob, -(torch.exp(logp_all) * logp_all).sum(-1).sum(-1)
    log_prob = torch.zeros(params.shape[0], device=params.device)
    entropy = torch.zeros(params.shape[0], device=params.device) if with_entropy else None
    for d, logits in enumerate(_split(params, spec)):
        logp_all = torch.log_softmax(logits, dim=-1)
        chosen = index[:, d:d + 1].clamp(0, logits.shape[-1] - 1)
        log_prob = log_prob + logp_all.gather(-1, chosen).squeeze(-1)
        if entropy is not None:
            entropy = entropy - (torch.exp(logp_all) * logp_all).sum(-1)
    return log_prob, entropy
