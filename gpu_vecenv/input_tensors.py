"""What a user passes where an env wants a tensor (actions, a reset mask, a state value),
made a torch tensor on metadata alone, with errors that name the argument.

Shared by :mod:`gpu_vecenv.actions`, :mod:`gpu_vecenv.reset_arguments` and
:mod:`gpu_vecenv.state_writes`, so every entry point refuses the same things with the same
words:

- :func:`to_tensor`: a dense torch tensor (as is, detached from autograd), a numpy array
  or a (nested) sequence of numbers. ``None``, strings, mappings, sets, object arrays
  (``None`` or a string among numbers, ints beyond 64 bits) and sparse tensors are a
  ``TypeError``; a ragged sequence (rows of different lengths) and unsigned 64-bit values
  beyond int64 are a ``ValueError``.
- :func:`check_device`: a tensor the env cannot read (on the ``meta`` device, or on
  another GPU than the env's) is a ``ValueError`` naming both devices.

Neither looks at a value on the device, so neither waits for a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

import numpy as np
import torch

NUMERIC_KINDS = "biufc"
"""numpy dtype kinds torch holds: bool, signed and unsigned ints, floats, complex."""

_INT64_MAX = np.iinfo(np.int64).max


def to_tensor(value: Any, name: str) -> torch.Tensor:
    """``value`` as a tensor (no copy where it is a tensor or a native-order numpy array).

    ``name`` is how messages refer to it (``"actions"``, ``"state['x']"``). A tensor that
    requires grad comes back detached (a view; environments do not differentiate through
    their inputs). Unsigned numpy ints of 32 or 64 bits become int64 (torch lacks their
    arithmetic).

    Raises:
        TypeError: not numbers (``None``, a string, a mapping, an object array), or a
            sparse tensor.
        ValueError: a ragged sequence, or uint64 values beyond int64.
    """
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided:
            raise TypeError(f"{name} is a {value.layout} tensor; pass a dense one "
                            "(tensor.to_dense())")
        return value.detach() if value.requires_grad else value
    if isinstance(value, np.ndarray):
        array = value
    elif value is None or isinstance(value, (str, bytes, Mapping, Set)):
        raise TypeError(f"{name} must be a tensor, a numpy array or a sequence of numbers, "
                        f"got {type(value).__name__}")
    else:
        try:
            array = np.asarray(value)
        except ValueError as exc:  # numpy: "inhomogeneous shape after 1 dimensions"
            raise ValueError(f"{name} is a ragged sequence (its rows differ in length: "
                             f"{exc}); pass a tensor or array of one shape") from None
        except (TypeError, RuntimeError, NotImplementedError) as exc:  # e.g. GPU tensors
            raise TypeError(f"{name} could not be read as an array ({exc}); pass a tensor "
                            "or a numpy array") from None
    if array.dtype.kind not in NUMERIC_KINDS:
        raise TypeError(f"{name} must hold numbers, got a numpy array of dtype {array.dtype}"
                        f"{_first_non_number(array)}")
    if array.dtype.kind == "u" and array.dtype.itemsize >= 4:
        if array.dtype.itemsize == 8 and array.size and array.max() > _INT64_MAX:
            raise ValueError(f"{name} holds {array.max()}, beyond the int64 range the env "
                             "takes")
        array = array.astype(np.int64)
    if not array.dtype.isnative:  # torch reads native byte order only
        array = array.astype(array.dtype.newbyteorder("="))
    if not (array.flags.writeable and array.flags.c_contiguous):
        # torch warns about read-only arrays (and np.ascontiguousarray makes 0-d ones 1-d)
        array = array.copy(order="C")
    return torch.from_numpy(array)


def _first_non_number(array: np.ndarray) -> str:
    """`` (at index i: None)`` for the first element of an object array that is not a
    number torch holds (an int beyond 64 bits included); ``""`` if none is found."""
    if array.dtype.kind != "O":
        return ""
    for index, item in np.ndenumerate(array):
        if isinstance(item, (bool, float, np.number)):
            continue
        if isinstance(item, int) and -(2**63) <= item < 2**64:
            continue
        what = "an int beyond 64 bits" if isinstance(item, int) else repr(item)[:40]
        where = index[0] if len(index) == 1 else index
        return f" (at index {where}: {what})"
    return ""


def check_device(tensor: torch.Tensor, device: torch.device, name: str) -> None:
    """``ValueError`` unless ``tensor`` can be moved to (or is on) the env's ``device``.

    Accepted: the env's device, the CPU, and for an env on the CPU any device that holds
    data. Refused: the ``meta`` device (no data) and, for an env on a GPU, other GPUs
    (moving between them would hide a device mix-up behind a slow copy).
    """
    where = tensor.device
    if where == device or where.type == "cpu":
        return
    if device.type == "cpu" and where.type != "meta":
        return
    raise ValueError(f"{name} is on {where} but the env runs on {device}; pass it "
                     f"{readable_on(device)}")


def readable_on(device: torch.device) -> str:
    """Where an env on ``device`` reads its inputs from, in words."""
    return "on the CPU" if device.type == "cpu" else f"on {device} or on the CPU"
