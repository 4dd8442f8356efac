"""``RunningMeanStd``: running mean and variance of batches of tensors, on their device.

The algorithm and starting values of ``gymnasium.wrappers.utils.RunningMeanStd`` (Chan et
al.'s parallel update; ``count`` starts at ``epsilon``, ``var`` at 1), with tensors
instead of arrays and one addition: an optional row mask, applied without a host sync.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class RunningMeanStd:
    """Mean, variance and count of every row seen so far.

    Args:
        shape: the shape of one row (``()`` for scalars).
        device: where the statistics live.
        epsilon: the starting count (keeps the first update well defined).
        dtype: of the statistics; float64 (as Gymnasium's reward statistics) keeps a
            long stream precise.

    Attributes:
        mean, var: ``shape`` tensors. count: a ``()`` tensor. All updated in place.
    """

    def __init__(
        self,
        shape: Sequence[int] = (),
        device: str | torch.device = "cpu",
        epsilon: float = 1e-4,
        dtype: torch.dtype = torch.float64,
    ):
        self.mean = torch.zeros(tuple(shape), dtype=dtype, device=device)
        self.var = torch.ones(tuple(shape), dtype=dtype, device=device)
        self.count = torch.full((), epsilon, dtype=dtype, device=device)

    def update(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Add the rows of ``x`` (``(batch, *shape)``), or only those where ``mask``
        (``(batch,)`` bool) is True. A mask with no True row changes nothing."""
        x = x.to(self.mean.dtype)
        if mask is None:
            count = torch.full((), x.shape[0], dtype=x.dtype, device=x.device)
            mean = x.mean(dim=0)
            var = x.var(dim=0, unbiased=False)
        else:
            keep = mask.reshape(-1, *([1] * (x.dim() - 1)))
            count = mask.sum().to(x.dtype)
            # masked rows may hold anything (even NaN): select, do not multiply
            mean = torch.where(keep, x, 0.0).sum(dim=0) / count.clamp(min=1)
            var = torch.where(keep, (x - mean) ** 2, 0.0).sum(dim=0) / count.clamp(min=1)
        self.update_from_moments(mean, var, count)

    def update_from_moments(
        self, batch_mean: torch.Tensor, batch_var: torch.Tensor, batch_count: torch.Tensor
    ) -> None:
        """Merge a batch given by its mean, (population) variance and row count."""
        delta = batch_mean - self.mean
        total = self.count + batch_count
        m2 = self.var * self.count + batch_var * batch_count
        m2 = m2 + delta.square() * self.count * batch_count / total
        self.mean.add_(delta * batch_count / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Copies of ``mean``, ``var`` and ``count`` (to save with a checkpoint)."""
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Overwrite the statistics in place from :meth:`state_dict`'s output."""
        for name in ("mean", "var", "count"):
            target = getattr(self, name)
            value = torch.as_tensor(state[name])
            if value.shape != target.shape:
                raise ValueError(
                    f"RunningMeanStd.load_state_dict: {name} has shape "
                    f"{tuple(value.shape)}, expected {tuple(target.shape)}"
                )
            target.copy_(value)
