"""Bookkeeping shared by the single-agent and multi-agent vector envs: what
``reset(seed=..., options=...)`` does to the RNG buffers, the ``reset_mask`` option, and
validated writes for ``set_state``. Each env applies them to its own unit of reset (an
env, or a game of many agents).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gpu_vecenv import seeding


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


def reset_mask_option(options: dict[str, Any] | None) -> torch.Tensor | None:
    """The ``reset_mask`` of ``reset(options=...)`` as a bool tensor (still on the device it
    came on; its shape is the caller's to check), or ``None`` for a full reset.

    Accepts ``None``, ``{}`` or ``{"reset_mask": mask}`` with ``mask`` a bool numpy array
    or torch tensor; anything else is a clear error.
    """
    if options is None:
        return None
    if not isinstance(options, dict):
        raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
    unknown = sorted(set(options) - {"reset_mask"})
    if unknown:
        raise ValueError(f"unknown reset option(s) {unknown}; supported: ['reset_mask']")
    if "reset_mask" not in options:
        return None
    mask = options["reset_mask"]
    if isinstance(mask, np.ndarray):
        if mask.dtype != np.bool_:
            raise TypeError(f"options['reset_mask'] must have dtype bool, got {mask.dtype}")
        return torch.from_numpy(mask)
    if isinstance(mask, torch.Tensor):
        if mask.dtype != torch.bool:
            raise TypeError(f"options['reset_mask'] must have dtype torch.bool, got {mask.dtype}")
        return mask
    raise TypeError("options['reset_mask'] must be a numpy array or a torch tensor, "
                    f"got {type(mask).__name__}")


def write_state(targets: dict[str, torch.Tensor], state: dict[str, Any],
                device: torch.device) -> bool:
    """Copy ``state`` into the buffers ``targets`` after validating every key, shape and
    dtype (nothing is written if anything is wrong). Returns whether anything was written."""
    unknown = sorted(set(state) - set(targets))
    if unknown:
        raise KeyError(f"unknown state key(s) {unknown}; valid: {sorted(targets)}")
    converted = {}
    for key, value in state.items():
        target, tensor = targets[key], torch.as_tensor(value)
        if tuple(tensor.shape) != tuple(target.shape):
            raise ValueError(f"state[{key!r}] has shape {tuple(tensor.shape)}, "
                             f"expected {tuple(target.shape)}")
        if tensor.dtype.is_floating_point and not target.dtype.is_floating_point:
            raise TypeError(f"state[{key!r}] must be {target.dtype}, got {tensor.dtype}")
        converted[key] = tensor.to(device=device, dtype=target.dtype)
    for key, tensor in converted.items():
        targets[key].copy_(tensor)
    return bool(converted)
