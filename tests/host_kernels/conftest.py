"""Fixtures of the CPU kernel tests: the host harness, built once per session."""

from __future__ import annotations

import pytest

from gpu_vecenv.backends.compiler import find_nvcc

from . import harness


@pytest.fixture(scope="session")
def host_harness(tmp_path_factory):
    """Path of the compiled host harness (skips only where nvcc is absent)."""
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    return harness.build(tmp_path_factory.mktemp("harness"))
