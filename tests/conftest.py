"""Shared test set-up: the ``gpu`` marker skips where CUDA or PyCUDA is missing."""

from __future__ import annotations

import importlib.util

import pytest
import torch


def _gpu_missing() -> str | None:
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    if importlib.util.find_spec("pycuda") is None:
        return "PyCUDA not installed"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _gpu_missing()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
