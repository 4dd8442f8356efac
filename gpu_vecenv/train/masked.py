"""Statistics over the live rows of a roll-out: the idle slots of a multi-agent env weigh 0.

A multi-agent env's slot is *idle* between its agent leaving the game (a tagged runner)
and the game's reset: it observes zeros, gets reward 0 and its actions are ignored
(``info["active"]`` is False; :mod:`gpu_vecenv.multi_agent.vector_env`). Such rows are
no samples of the game, so the on-policy learners give them weight 0 everywhere: losses,
advantage normalisation, observation statistics and logged metrics.

A ``mask`` here is a float tensor of 0s and 1s of the data's shape (1 = live). Shapes
stay fixed whatever the mask holds (no boolean indexing) and nothing is read on the host,
so a masked update can be captured as a CUDA graph. In a data-parallel run the counts
and moments are those of every rank's live rows (:mod:`gpu_vecenv.train.distributed`'s
collectives; no-ops in a single process). A batch without a live row gives zeros, never
NaN.
"""

from __future__ import annotations

import torch

from gpu_vecenv.train import distributed


def live_count(mask: torch.Tensor) -> torch.Tensor:
    """Live rows of ``mask`` over all ranks (a device scalar)."""
    return distributed.all_reduce_sum_(mask.sum().reshape(1))[0]


def row_weights(mask: torch.Tensor) -> torch.Tensor:
    """Per-row weights that turn ``(x * weights).sum()`` into the mean of ``x`` over the
    live rows of every rank, once gradients (or logged values) are averaged over the
    ranks: ``mask * world_size / live rows of all ranks`` (zeros if none is live).
    Shape of ``mask``."""
    count = torch.clamp(live_count(mask), min=1.0)
    return mask * (float(distributed.world_size()) / count)


def mean_var(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None,
             unbiased: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean and variance of the live samples of ``x`` over all ranks, and their count:
    over every element (``dim=None``; ``mask`` of ``x``'s shape) or along ``dim``
    (``mask`` of shape ``(x.shape[dim],)``: one flag per row). Two passes, as
    :func:`gpu_vecenv.train.distributed.mean_var`. Fewer live samples than the variance
    needs (0, or 1 when unbiased) give variance 0."""
    if dim is None:
        weights = mask
        packed = torch.stack([(x * weights).sum(), weights.sum()])
    else:
        shape = [1] * x.dim()
        shape[dim] = -1
        weights = mask.reshape(shape)
        packed = torch.cat([(x * weights).sum(dim).reshape(-1), mask.sum().reshape(1)])
    packed = distributed.all_reduce_sum_(packed)
    count = packed[-1]
    total = packed[:-1] if dim is not None else packed[0]
    mean = total / torch.clamp(count, min=1.0)
    if dim is not None:
        mean = mean.reshape([s for i, s in enumerate(x.shape) if i != dim])
    centred = x - (mean if dim is None else mean.unsqueeze(dim))
    squares = (centred.square() * weights)
    sq = distributed.all_reduce_sum_(squares.sum() if dim is None else squares.sum(dim))
    var = sq / torch.clamp(count - 1.0 if unbiased else count, min=1.0)
    return mean, var, count


def normalize_advantages(advantages: torch.Tensor, mask: torch.Tensor,
                         eps: float = 1e-8) -> torch.Tensor:
    """:func:`gpu_vecenv.train.losses.normalize_advantages` with the mean and unbiased std
    of the live advantages of all ranks (idle rows come out finite, to be weighted 0)."""
    mean, var, _ = mean_var(advantages, mask)
    return (advantages - mean) / (var.sqrt() + eps)


def weights_and_advantages(advantages: torch.Tensor, mask: torch.Tensor | None,
                           normalize: bool) -> tuple[torch.Tensor | None, torch.Tensor]:
    """A loss's row weights (:func:`row_weights`; None without ``mask``: plain means) and
    its advantages, normalised over all ranks' (live) rows where ``normalize``."""
    weights = None if mask is None else row_weights(mask)
    if normalize and mask is not None:
        advantages = normalize_advantages(advantages, mask)
    elif normalize:
        advantages = distributed.normalize_advantages(advantages)
    return weights, advantages


def explained_variance(returns: torch.Tensor, values: torch.Tensor,
                       mask: torch.Tensor) -> torch.Tensor:
    """``1 - Var(returns - values) / Var(returns)`` over the live rows of all ranks."""
    return 1.0 - (mean_var(returns - values, mask)[1]
                  / (mean_var(returns, mask)[1] + 1e-8))
