"""Stopping a run whose training diverged: a loss, or a policy's weights, NaN or infinite.

Once a policy's weights are NaN its actions are NaN, and the env refuses them ("actions
that are not in range"): true, but the cause is the training, and the message should say
so. :func:`check_finite` looks where the trainer logs a row: the trainer queues the check
(:func:`finite_flag`) before it waits for the row's iterations, so its kernels run behind
them and its host work overlaps theirs, and reads the one bool after the wait (one more
small read per row, none per iteration); :func:`blame_divergence` looks when
something fails in between, e.g. the env refusing the actions of NaN weights on the CPU,
where actions are checked as they come.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from gpu_vecenv.train import distributed


class TrainingDiverged(RuntimeError):
    """A loss or the weights of a policy are no longer finite (NaN or infinite)."""


ADVICE = ("Nothing after the last checkpoint was saved. Try a lower learning rate, "
          "gradient clipping (max_grad_norm) or a smaller reward_scale, and check that the "
          "env's observations and rewards are finite.")


def _weights(group: Any) -> list[tuple[str, torch.Tensor]]:
    """The policy's parameters and float buffers (e.g. observation statistics)."""
    model = group.learner.model
    named = [*model.named_parameters(), *model.named_buffers()]
    return [(name, t) for name, t in named if t.is_floating_point()]


def _losses(metrics: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in metrics.items() if k.endswith("loss")}


def finite_flag(groups: Sequence[Any], metrics: dict[str, dict[str, torch.Tensor]]
                ) -> torch.Tensor | None:
    """A device bool, queued without a sync: whether every policy's losses
    (``metrics[policy]``, device scalars) and weights are finite (None: no weights)."""
    flags = []
    for g in groups:
        tensors = [t for _, t in _weights(g)]
        if tensors:
            tensors += [v.to(tensors[0].device)
                        for v in _losses(metrics.get(g.name, {})).values()]
            flags.append(_all_finite(tensors))
    if not flags:
        return None
    return torch.stack([f.to(flags[0].device) for f in flags]).all()


def check_finite(groups: Sequence[Any], metrics: dict[str, dict[str, torch.Tensor]],
                 where: str, flag: torch.Tensor | None = None) -> None:
    """Raise :class:`TrainingDiverged` if a policy's losses (``metrics[policy]``, device
    scalars) or weights are not finite; ``where`` (``"at step 512"``) says when. ``flag``:
    :func:`finite_flag` of the same, queued earlier (default: queued here). One read of
    one bool when all is well."""
    if flag is None:
        flag = finite_flag(groups, metrics)
    if flag is not None and not bool(flag):
        raise TrainingDiverged(f"training diverged {where}: "
                               f"{_what_is_not_finite(groups, metrics)}. {ADVICE}")


def _all_finite(tensors: list[torch.Tensor]) -> torch.Tensor:
    """A device bool, no sync: whether every element of ``tensors`` is finite. Through
    their max-norms (NaN and inf propagate, finite values cannot overflow), which torch
    computes for many tensors in a few kernels (``_foreach_norm``, as
    ``clip_grad_norm_`` does) instead of two per tensor."""
    tensors = [t for t in tensors if t.numel()]  # (an empty tensor has no max-norm)
    if not tensors:
        return torch.tensor(True)
    norms = torch._foreach_norm(tensors, float("inf"))
    return torch.stack([n.to(norms[0].dtype) for n in norms]).isfinite().all()


@contextmanager
def blame_divergence(groups: Sequence[Any], where: Callable[[], str]) -> Iterator[None]:
    """Re-raise an error from the block as :class:`TrainingDiverged` (the error as its
    cause) if a policy's weights are then not finite: they caused it."""
    try:
        yield
    except TrainingDiverged:
        raise
    except Exception as exc:
        if distributed.is_peer_failure(exc):
            # Another rank failed: this rank's device may hold an all-reduce that never
            # ends, and reading the weights would wait for it for ever.
            raise
        try:
            diverged = not all(bool(_all_finite([t for _, t in _weights(g)]))
                               for g in groups if _weights(g))
        except Exception:  # the device itself failed: the original error says more
            diverged = False
        if not diverged:
            raise
        first = (str(exc).splitlines() or [""])[0][:200]
        raise TrainingDiverged(
            f"training diverged {where()}: {_what_is_not_finite(groups, {})}; what failed "
            f"next: {type(exc).__name__}: {first}. {ADVICE}") from exc


def _what_is_not_finite(groups: Sequence[Any],
                        metrics: dict[str, dict[str, torch.Tensor]]) -> str:
    """``policy 'default': loss nan; weights not finite: actor.0.weight, ...``."""
    parts = []
    for g in groups:
        bad_losses = [f"{k} {float(v):g}" for k, v in _losses(metrics.get(g.name, {})).items()
                      if not torch.isfinite(v).all()]
        bad_weights = [name for name, t in _weights(g) if not bool(t.isfinite().all())]
        what = [", ".join(bad_losses)] if bad_losses else []
        if bad_weights:
            more = f" (and {len(bad_weights) - 4} more)" if len(bad_weights) > 4 else ""
            what.append(f"weights not finite: {', '.join(bad_weights[:4])}{more}")
        if what:
            parts.append(f"policy {g.name!r}: {'; '.join(what)}")
    return "; ".join(parts) or "a loss or weights not finite"
