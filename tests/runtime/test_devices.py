"""A device an env cannot run on is a ValueError saying what is wrong and what to do,
for single- and multi-agent envs, not torch's ``AssertionError`` from deep inside.

The machine states (CPU-only torch, CUDA build without a GPU, one GPU) are simulated by
patching torch, so every test runs the same on the CPU-only CI and on a GPU machine.
"""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv.devices import usable_device
from gpu_vecenv.entry_points import make_vec
from tests.tag.makers import make_tag


@pytest.fixture
def cpu_only_torch(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.version, "hip", None)


@pytest.mark.parametrize(
    "make",
    [
        lambda device: make_vec("GPUCartPole-v1", 2, device=device),
        lambda device: make_tag(2, device=device),
    ],
    ids=["single-agent", "multi-agent"],
)
@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda", 1)])
def test_cuda_on_a_cpu_only_torch_says_so(cpu_only_torch, make, device):
    with pytest.raises(
        ValueError,
        match=r"needs a CUDA build of PyTorch, but this one .* "
        r"is CPU-only; use device='cpu'",
    ):
        make(device)


def test_cuda_build_without_a_visible_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    with pytest.raises(ValueError, match="torch sees no CUDA GPU .*CUDA_VISIBLE_DEVICES"):
        make_vec("GPUPendulum-v1", 2, device="cuda")


def test_cuda_index_past_the_last_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(
        ValueError,
        match=r"'cuda:3' but torch sees 1 CUDA GPU\(s\): cuda:0 to "
        r"cuda:0",
    ):
        usable_device("cuda:3")


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "banana", "", 1.5])
@pytest.mark.parametrize(
    "make",
    [
        lambda device: make_vec("GPUAcrobot-v1", 2, device=device),
        lambda device: make_tag(1, device=device),
    ],
    ids=["single-agent", "multi-agent"],
)
def test_nonsense_devices_are_a_value_error(make, device):
    with pytest.raises(ValueError, match=r"is not a torch device; use 'cpu', 'cuda' or 'cuda:N'"):
        make(device)


def test_valid_devices_still_resolve(cpu_only_torch):
    assert usable_device(None) == torch.device("cpu")
    assert usable_device("cpu") == torch.device("cpu")
    assert make_vec("GPUCartPole-v1", 2, device=torch.device("cpu")).device.type == "cpu"
