"""Shared test set-up: the ``gpu`` marker skips where torch sees no CUDA GPU.

A GPU machine without a kernel compiler does not skip them: the CUDA tests fail there,
saying what is missing (the kernels need no more than a CUDA build of torch)."""

from __future__ import annotations

import pytest
import torch


def _gpu_missing() -> str | None:
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _gpu_missing()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
