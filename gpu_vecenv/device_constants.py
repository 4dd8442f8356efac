"""Small constant tensors on a device, made once per (values, dtype, device).

An env's torch reference needs some Python numbers as tensors: a 0-d float32 operand
keeps ``x / c`` a true division (as in the kernels; torch's CUDA kernel multiplies by a
reciprocal when ``c`` is a Python float), and action tables are indexed by actions. Made
inside ``step``, each would be a host-to-device copy every step: slow on a GPU, and not
allowed while a CUDA graph is captured. Made here, they are copied once and reused.

The tensors are shared: read them, never write them in place. They are kept for the
life of the process (a captured graph may still read one; a few dozen exist at most).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch


@functools.cache
def _constant(values: tuple, shape: tuple[int, ...], dtype: torch.dtype,
              device: torch.device) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=device).reshape(shape)


def device_constant(value: float | int | Sequence | np.ndarray, dtype: torch.dtype,
                    device: torch.device) -> torch.Tensor:
    """``torch.tensor(value, dtype=dtype, device=device)``, made on the first call and the
    same tensor on every later one with equal arguments (a 0-d tensor for a number)."""
    array = np.asarray(value)
    return _constant(tuple(array.ravel().tolist()), array.shape, dtype, torch.device(device))
