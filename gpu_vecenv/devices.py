"""The torch device an env runs on: the default choice, and a clear error for one that
cannot work here.

torch accepts ``torch.device("cuda")`` on a CPU-only build and fails later, deep inside,
with ``AssertionError: Torch not compiled with CUDA enabled``; an env checks its device
once, at construction, and says what is wrong and what to do instead.
"""

from __future__ import annotations

import torch

_USE_INSTEAD = "use device='cpu', or leave device unset to get a GPU when there is one"


def default_device() -> torch.device:
    """The current CUDA device if torch sees one, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def usable_device(device: str | torch.device | None) -> torch.device:
    """The device an env runs on, checked usable on this machine: ``None`` gives
    :func:`default_device`, ``"cuda"`` the current CUDA device (with its index).

    Raises:
        ValueError: ``device`` is not a torch device (``"gpu"``, ``"cuda:x"``), or this
            machine cannot run it (a CPU-only PyTorch, no visible GPU, an index past the
            last GPU); the message says which and what to use instead.
    """
    if device is None:
        return default_device()
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device={device!r} is not a torch device; use 'cpu', 'cuda' or 'cuda:N'"
        ) from None
    if resolved.type == "cuda":
        return _cuda_device(device, resolved)
    if resolved.type != "cpu":
        # mps, xpu, ...: whether the build and machine support it shows on first use.
        try:
            torch.empty(0, device=resolved)
        except Exception as exc:  # any failure means: not usable here
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(
                f"device={device!r} cannot be used here ({reason[:200]}); {_USE_INSTEAD}"
            ) from None
    return resolved


def _cuda_device(requested: str | torch.device, device: torch.device) -> torch.device:
    if not torch.cuda.is_available():
        if torch.version.cuda is None and torch.version.hip is None:
            raise ValueError(
                f"device={str(requested)!r} needs a CUDA build of PyTorch, but this one "
                f"({torch.__version__}) is CPU-only; {_USE_INSTEAD}, or install a CUDA "
                "build of PyTorch (see the README)"
            )
        raise ValueError(
            f"device={str(requested)!r} but torch sees no CUDA GPU (no NVIDIA driver, or "
            f"CUDA_VISIBLE_DEVICES hides them all); {_USE_INSTEAD}"
        )
    count = torch.cuda.device_count()
    if device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    if device.index >= count:
        raise ValueError(
            f"device={str(requested)!r} but torch sees {count} CUDA GPU(s): "
            f"cuda:0 to cuda:{count - 1}"
        )
    return device
