"""The arguments of ``reset(seed=..., options=...)``, as the single-agent and the
multi-agent vector envs both take them: the seeds of a ``seed=`` argument (one per env, or
per game of many agents), what they do to the RNG buffers, and the ``reset_mask`` option.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from gpu_vecenv import seeding
from gpu_vecenv.input_tensors import check_device, to_tensor


def seed_tensor(seed: Any, count: int, device: torch.device,
                unit: str = "num_envs") -> tuple[torch.Tensor, int | None]:
    """The ``(count,)`` int64 seeds of a ``reset(seed=...)`` argument.

    ``seed`` is an int (every unit gets it; units still draw different numbers since their
    index is part of the RNG counter) or a sequence of ``count`` ints (one per unit).
    Returns the tensor and the int seed (``None`` for a sequence).
    """
    if isinstance(seed, (list, tuple, np.ndarray)):
        if len(seed) != count:
            raise ValueError(f"a list of seeds must have {unit}={count} entries, got {len(seed)}")
        values = [seeding.seed_as_int64(seeding.check_seed(s)) for s in seed]
        return torch.tensor(values, dtype=torch.int64, device=device), None
    value = seeding.check_seed(seed)
    return torch.full((count,), seeding.seed_as_int64(value), dtype=torch.int64,
                      device=device), value


def reseed(seeds: torch.Tensor, counters: torch.Tensor, new: torch.Tensor,
           mask: torch.Tensor | None) -> None:
    """Give the units in ``mask`` (all if ``None``) the seeds ``new`` and restart their
    streams (counter 0), in place."""
    if mask is None:
        seeds.copy_(new)
        counters.zero_()
    else:
        seeds.copy_(torch.where(mask, new, seeds))
        counters.masked_fill_(mask, 0)


def reset_mask_option(options: dict[str, Any] | None,
                      device: torch.device) -> torch.Tensor | None:
    """The ``reset_mask`` of ``reset(options=...)`` as a bool tensor (still on the device
    it came on, ``device`` or the CPU; its shape is the caller's to check), or ``None``
    for a full reset.

    Accepts ``None``, ``{}`` or ``{"reset_mask": mask}`` with ``mask`` a bool numpy array
    or torch tensor on ``device`` or the CPU; anything else is a clear error
    (``TypeError`` for a wrong type or dtype, ``ValueError`` for a wrong device).
    """
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
    unknown = sorted(map(repr, set(options) - {"reset_mask"}))
    if unknown:
        raise ValueError(f"unknown reset option(s) [{', '.join(unknown)}]; supported: "
                         "['reset_mask']")
    if "reset_mask" not in options:
        return None
    name = "options['reset_mask']"
    mask = options["reset_mask"]
    if not isinstance(mask, (np.ndarray, torch.Tensor)):
        raise TypeError(f"{name} must be a numpy array or a torch tensor of bools, got "
                        f"{type(mask).__name__}")
    tensor = to_tensor(mask, name)
    if tensor.dtype != torch.bool:
        raise TypeError(f"{name} must have dtype bool, got {mask.dtype}")
    check_device(tensor, device, name)
    return tensor
