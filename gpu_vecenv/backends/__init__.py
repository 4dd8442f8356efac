"""Backends: ``"torch"`` (reference, any device) and ``"cuda"`` (the CUDA kernels).

:func:`resolve_backend` turns the user's ``backend=`` argument into a backend name;
:func:`build_backend` builds it, falling back to the torch backend (with a notice naming
the cause and its fix) when ``"auto"`` finds that the kernels cannot be built or loaded.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

BACKENDS = ("auto", "cuda", "torch")

_notices_shown: set[str] = set()


def cuda_backend_problem(device: torch.device) -> str | None:
    """Why the CUDA backend cannot run on ``device`` (``None`` if it can, as far as can be
    told without compiling)."""
    if device.type != "cuda":
        return f"the env's device is {device}, not a CUDA device"
    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            return ("torch sees no CUDA GPU: this torch is a CPU-only build (install a CUDA "
                    "build of torch)")
        return "torch sees no CUDA GPU (no NVIDIA driver, or no GPU visible to this process)"
    from gpu_vecenv.backends.compiler import kernels_problem

    index = device.index if device.index is not None else torch.cuda.current_device()
    return kernels_problem(index)


def _notice(problem: str) -> None:
    """Say once per cause that a CUDA device runs the torch backend, why, and how to make
    that backend fast (shown only where the device is a CUDA GPU)."""
    if problem not in _notices_shown:
        _notices_shown.add(problem)
        warnings.warn(f"gpu_vecenv: using the torch backend ({problem}); "
                      "torch_compile=True, torch_graphs=True make it several times faster",
                      stacklevel=4)


def resolve_backend(backend: str, device: torch.device) -> str:
    """``"cuda"`` or ``"torch"`` for the requested ``backend`` on ``device``.

    ``"auto"`` picks ``"cuda"`` when it can run and ``"torch"`` otherwise (with a
    one-line notice if a CUDA device is present). Asking for ``"cuda"`` where it cannot
    run raises a ``RuntimeError`` saying what is missing.
    """
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
    if device.type == "cuda":
        _notice(problem)
    return "torch"


def build_backend(backend: str, context: Any, cuda_backend: Callable[[Any], Any],
                  torch_backend: Callable[[Any], Any]) -> tuple[str, Any]:
    """``(name, backend object)`` for the requested ``backend`` on ``context.device``:
    ``cuda_backend(context)`` or ``torch_backend(context)``, the backend classes of the
    env's kind (``context`` is what a backend sees of its env).

    Under ``"auto"``, kernels that fail to build or load (a compiler error, a driver
    that cannot load the code) give the torch backend and a notice with the first lines
    of the error; ``backend="cuda"`` raises it in full.
    """
    from gpu_vecenv.backends.compiler import CudaCompileError, KernelsUnavailable

    if resolve_backend(backend, context.device) == "cuda":
        try:
            return "cuda", cuda_backend(context)
        except (KernelsUnavailable, CudaCompileError) as exc:
            if backend == "cuda":
                raise
            lines = str(exc).splitlines()
            _notice(" / ".join(lines[:3]) + (" ..." if len(lines) > 3 else ""))
    return "torch", torch_backend(context)
