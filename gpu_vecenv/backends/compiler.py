"""Locating nvcc. (The CUDA backend's compile step builds on this.)"""

from __future__ import annotations

import os
import shutil


def find_nvcc() -> str | None:
    """Path of nvcc: ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, PATH, then /usr/local/cuda."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and os.path.isfile(os.path.join(root, "bin", "nvcc")):
            return os.path.join(root, "bin", "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    default = "/usr/local/cuda/bin/nvcc"
    return default if os.path.isfile(default) else None
