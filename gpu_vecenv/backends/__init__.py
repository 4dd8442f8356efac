"""Backends: ``"torch"`` (reference, any device) and ``"cuda"`` (PyCUDA kernels).

:func:`resolve_backend` turns the user's ``backend=`` argument into a backend name.
"""

from __future__ import annotations

import importlib.util
import shutil
import warnings

import torch

BACKENDS = ("auto", "cuda", "torch")

_notice_shown = False


def cuda_backend_problem(device: torch.device) -> str | None:
    """Why the CUDA backend cannot run on ``device`` (``None`` if it can)."""
    if device.type != "cuda":
        return f"the env's device is {device}, not a CUDA device"
    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    if importlib.util.find_spec("pycuda") is None:
        return "PyCUDA is not installed (pip install 'gpu-vecenv[cuda]')"
    from gpu_vecenv.backends.compiler import find_nvcc

    if find_nvcc() is None and shutil.which("nvcc") is None:
        return "nvcc (the CUDA compiler) is not on PATH and CUDA_HOME is not set"
    return None


def resolve_backend(backend: str, device: torch.device) -> str:
    """``"cuda"`` or ``"torch"`` for the requested ``backend`` on ``device``.

    ``"auto"`` picks ``"cuda"`` when it can run and ``"torch"`` otherwise (with a
    one-line notice if a CUDA device is present). Asking for ``"cuda"`` where it cannot
    run raises a ``RuntimeError`` saying what is missing.
    """
    global _notice_shown
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "torch":
        return "torch"
    problem = cuda_backend_problem(device)
    if backend == "cuda":
        if problem is not None:
            raise RuntimeError(f"backend='cuda' cannot run: {problem}")
        return "cuda"
    if problem is None:
        return "cuda"
    if device.type == "cuda" and not _notice_shown:
        _notice_shown = True
        warnings.warn(f"gpu_vecenv: using the torch backend ({problem})", stacklevel=3)
    return "torch"
