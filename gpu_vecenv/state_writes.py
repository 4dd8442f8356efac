"""``set_state``'s validated writes, shared by the single-agent and the multi-agent vector
envs: every key, shape, dtype, device and value of the new state is checked before
anything is written (:func:`write_state`), against the bounds the env's
:class:`~gpu_vecenv.definition.StateField` s declare (:func:`state_bounds`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from gpu_vecenv.input_tensors import check_device, to_tensor

_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _state_dtype_problem(tensor: torch.Tensor, target: torch.Tensor) -> str | None:
    """Why a value of ``tensor``'s dtype cannot be written to ``target`` (``None``: it
    can): floats take real numbers, ints and bools take ints and bools."""
    if tensor.dtype.is_complex:
        return "complex values"
    if tensor.dtype.is_floating_point:
        return None if target.dtype.is_floating_point else "floating-point values"
    if tensor.dtype in (torch.bool, *_INT_DTYPES):
        return None
    return "an unsupported dtype"  # torch's uint16/32/64: too few ops to range-check


def _value_range(target: torch.Tensor, bounds: tuple[int | None, int | None]) -> tuple[int, int]:
    """The ints ``target`` takes: its dtype's range, narrowed by ``bounds``."""
    if target.dtype == torch.bool:
        low, high = 0, 1
    else:
        info = torch.iinfo(target.dtype)
        low, high = info.min, info.max
    lower, upper = bounds
    return (low if lower is None else max(low, lower),
            high if upper is None else min(high, upper))


def state_bounds(fields: Iterable[Any]) -> dict[str, tuple[int | None, int | None]]:
    """``{name: (low, high)}`` of the :class:`~gpu_vecenv.definition.StateField` s that
    declare bounds, for :func:`write_state`."""
    return {f.name: (f.low, f.high) for f in fields if f.low is not None or f.high is not None}


def write_state(targets: dict[str, torch.Tensor], state: Mapping[str, Any],
                device: torch.device,
                bounds: Mapping[str, tuple[int | None, int | None]] | None = None) -> bool:
    """Copy ``state`` into the buffers ``targets`` after validating every key, type,
    shape, dtype, device and value (nothing is written if anything is wrong). Returns
    whether anything was written.

    Values: floats must be finite once in the target's dtype (NaN, inf and float64
    values beyond float32's range are refused); ints and bools must fit the target's
    dtype (no wrap-around) and ``bounds[key]`` (inclusive ``(low, high)``, ``None``: no
    bound). Checking values costs one host sync when they are on a GPU (``set_state`` is
    not a per-step call).

    Raises:
        TypeError: ``state`` is not a mapping, or a value is not numbers or has a dtype
            the key does not take (floats for an int, complex).
        KeyError: a key that is not one of ``targets``.
        ValueError: a wrong shape, a ragged sequence, a device the env cannot read, or
            a value out of range / not finite.
    """
    if not isinstance(state, Mapping):
        raise TypeError(f"state must be a dict {{key: tensor}} with keys among "
                        f"{sorted(targets)}, got {type(state).__name__}")
    unknown = sorted(map(repr, (key for key in state if key not in targets)))
    if unknown:
        raise KeyError(f"unknown state key(s) [{', '.join(unknown)}]; valid: {sorted(targets)}")
    bounds = bounds or {}
    converted, given, oks = {}, {}, []
    for key, value in state.items():
        name, target = f"state[{key!r}]", targets[key]
        tensor = to_tensor(value, name)
        if tuple(tensor.shape) != tuple(target.shape):
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}, "
                             f"expected {tuple(target.shape)}")
        problem = _state_dtype_problem(tensor, target)
        if problem is not None:
            raise TypeError(f"{name} must be {target.dtype}, got {problem} ({tensor.dtype})")
        check_device(tensor, device, name)
        given[key] = tensor
        if target.dtype.is_floating_point:
            tensor = tensor.to(device=device, dtype=target.dtype)
            oks.append(torch.isfinite(tensor).all())
        else:
            tensor = tensor.to(device=device, dtype=torch.int64)
            low, high = _value_range(target, bounds.get(key, (None, None)))
            oks.append(((tensor >= low) & (tensor <= high)).all())
        converted[key] = tensor
    if oks and not bool(torch.stack(oks).all()):  # the one sync (on a GPU)
        raise ValueError(_describe_bad_values(converted, given, targets, bounds))
    for key, tensor in converted.items():
        targets[key].copy_(tensor)
    return bool(converted)


def _describe_bad_values(converted: dict[str, torch.Tensor], given: dict[str, torch.Tensor],
                         targets: dict[str, torch.Tensor],
                         bounds: Mapping[str, tuple[int | None, int | None]]) -> str:
    """The first key whose values are refused, what it takes and its first bad value (as
    given, before conversion to the target's dtype)."""
    for key, tensor in converted.items():
        target = targets[key]
        if target.dtype.is_floating_point:
            bad = ~torch.isfinite(tensor)
            largest = torch.finfo(target.dtype).max
            takes = f"finite {target.dtype} values (no NaN or inf; |x| <= {largest:.4g})"
        else:
            low, high = _value_range(target, bounds.get(key, (None, None)))
            bad = (tensor < low) | (tensor > high)
            takes = f"values in [{low}, {high}] ({target.dtype})"
        if bool(bad.any()):
            where = tuple(torch.nonzero(bad)[0].tolist())
            index = where[0] if len(where) == 1 else where
            return (f"state[{key!r}] must hold {takes}; it holds {given[key][where].item()} at "
                    f"index {index} ({int(bad.sum())} bad value(s)); nothing was written")
    return "a state value is out of range; nothing was written"
