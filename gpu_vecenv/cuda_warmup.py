"""The CUDA driver started on a thread of its own while torch is imported.

``import torch`` takes seconds (its shared libraries, then thousands of Python modules);
starting the CUDA driver and creating the GPU's primary context, which torch's first CUDA
call does next (~0.3 s on an H200), needs only the driver's library. So a command that is
about to train on a GPU (``gpu-vecenv train``) calls :func:`start` before it imports
torch: the thread calls ``cuInit`` and ``cuDevicePrimaryCtxRetain`` through ``ctypes``
while the main thread imports, and torch's runtime then finds the context made (the CUDA
runtime uses each device's primary context, so there is one context either way).

The thread's reference to the context is never released: the process keeps the context
until it exits, as it would after torch's first CUDA call. Nothing here raises: without a
driver, without the device, or on any failure the thread just ends and torch starts CUDA
itself as always. ``GPU_VECENV_CUDA_WARMUP=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Mapping

OFF_ENV = "GPU_VECENV_CUDA_WARMUP"
"""Set to ``0`` to leave CUDA's start to torch."""


def device_ordinal(device: str, environ: Mapping[str, str] = os.environ) -> int | None:
    """The CUDA device (as the driver numbers the visible ones) that a command with the
    torch device string ``device`` will use, or ``None`` where it will not use one for
    sure: ``"auto"`` and ``"cuda"`` are ``LOCAL_RANK`` under torchrun (the trainer's
    ``cuda:LOCAL_RANK``), else 0; ``"cuda:N"`` is N; anything else (``"cpu"``, a bad
    string) is ``None``."""
    if environ.get(OFF_ENV, "1") == "0":
        return None
    device = device.strip().lower()
    try:
        if device in ("auto", "cuda"):
            return int(environ.get("LOCAL_RANK", "0"))
        if device.startswith("cuda:"):
            return int(device[len("cuda:"):])
    except ValueError:
        return None
    return None


def start(device: str, environ: Mapping[str, str] = os.environ) -> threading.Thread | None:
    """Start the driver and the primary context of ``device``'s GPU on a daemon thread
    (see the module docstring); returns the thread, or ``None`` where there is nothing to
    start (:func:`device_ordinal`)."""
    ordinal = device_ordinal(device, environ)
    if ordinal is None or ordinal < 0:
        return None
    thread = threading.Thread(target=retain_primary_context, args=(ordinal,),
                              name="gpu_vecenv-cuda-warmup", daemon=True)
    thread.start()
    return thread


def retain_primary_context(ordinal: int) -> bool:
    """``cuInit(0)`` and ``cuDevicePrimaryCtxRetain`` for device ``ordinal``; whether the
    context now exists (``False`` on any failure, nothing raised)."""
    try:
        driver = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
        if driver.cuInit(0) != 0:
            return False
        device = ctypes.c_int()
        if driver.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
            return False
        context = ctypes.c_void_p()
        return driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0
    except (OSError, AttributeError):  # no driver library, or one without these calls
        return False
