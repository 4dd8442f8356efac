"""Kernel arguments packed once (the fixed head) plus per launch (the rest) lay out
exactly as packing them all at once, as the C compiler lays kernel parameters out (CPU)."""

from __future__ import annotations

import struct

import pytest

from gpu_vecenv.backends.launch import _split


@pytest.mark.parametrize("fmt, fixed_count, split", [
    ("fffPPPiii", 5, True),     # constants + pointers, then pointers: the env kernels
    ("fffPP", 3, True),         # three floats, then a pointer at offset 16
    ("ffiPiP", 3, True),
    ("fffiP", 3, False),        # the rest starts with an int at offset 12: packed whole
    ("PPif", 0, False),         # nothing fixed
    ("fP", 2, False),           # nothing per launch
])
def test_split_packing_equals_whole_packing(fmt, fixed_count, split):
    values = [1.5 + k if c == "f" else (1000 + k if c == "i" else 0xABC000 + k)
              for k, c in enumerate(fmt)]
    fixed, rest = tuple(values[:fixed_count]), values[fixed_count:]
    per_launch, offset, tail = _split(fmt, fixed)
    assert (offset > 0) == split
    buffer = bytearray(struct.calcsize(fmt))
    if offset:
        struct.pack_into(fmt[:fixed_count], buffer, 0, *fixed)
    tail.pack_into(buffer, offset, *per_launch, *rest)
    assert bytes(buffer) == struct.pack(fmt, *values)


class _Launches:
    """A stand-in for ``cuLaunchKernel``: records each call's arguments and the packed
    argument buffer, and answers with the next of ``results``."""

    def __init__(self, kernel, results=(0,)):
        self.kernel, self.results, self.calls = kernel, list(results), []

    def __call__(self, *args):
        self.calls.append((args, bytes(self.kernel._buffer)))
        return self.results.pop(0) if len(self.results) > 1 else self.results[0]


def _stub_kernel(monkeypatch, fmt, fixed, current_device=0, stream=0, results=(0,)):
    import ctypes

    from gpu_vecenv.backends import launch

    kernel = object.__new__(launch.Kernel)
    kernel.name, kernel.device_index, kernel.shared_bytes = "k", 0, 64
    kernel._function = ctypes.c_void_p(0x1234)
    kernel._buffer = ctypes.create_string_buffer(struct.calcsize(fmt))
    kernel._extra = object()
    kernel._fixed, kernel._offset, kernel._struct = _split(fmt, fixed)
    if kernel._offset:
        struct.pack_into(fmt[:len(fixed)], kernel._buffer, 0, *fixed)
    kernel._launch = _Launches(kernel, results)
    device = {"current": current_device}

    class SwitchDevice:  # torch.cuda.device(i) without CUDA
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            self.saved, device["current"] = device["current"], self.index

        def __exit__(self, *exc):
            device["current"] = self.saved

    monkeypatch.setattr(launch, "_CURRENT_DEVICE", lambda: device["current"])
    monkeypatch.setattr(launch, "_RAW_STREAM", lambda index: stream)
    monkeypatch.setattr(launch.torch.cuda, "device", SwitchDevice)
    return kernel, device


@pytest.mark.parametrize("stream", [0, 0xBEEF])
@pytest.mark.parametrize("current_device", [0, 1])
def test_a_launch_passes_its_arguments_and_packed_buffer(monkeypatch, stream,
                                                         current_device):
    fmt, values = "ffPPi", (1.5, 2.5, 0xA000, 0xB000, 7)
    kernel, device = _stub_kernel(monkeypatch, fmt, values[:2], current_device, stream)
    kernel((3, 2, 1), (128, 1, 1), values[2:])
    (args, packed), = kernel._launch.calls
    assert args[:8] == (kernel._function, 3, 2, 1, 128, 1, 1, 64)
    assert (args[8] is None) if stream == 0 else (args[8].value == stream)
    assert args[9] is None and args[10] is kernel._extra
    assert packed == struct.pack(fmt, *values)
    assert device["current"] == current_device  # switched for the launch only


def test_a_launch_without_a_context_binds_it_and_retries(monkeypatch):
    from gpu_vecenv.backends import driver

    bound = []
    monkeypatch.setattr(driver, "make_current", bound.append)
    monkeypatch.setattr(driver, "error_text", lambda result: f"error {result}")  # no libcuda
    kernel, _ = _stub_kernel(monkeypatch, "Pi", (), results=(
        driver.CUDA_ERROR_INVALID_CONTEXT, 0))
    kernel((1, 1, 1), (32, 1, 1), (0xA000, 3))
    assert bound == [0] and len(kernel._launch.calls) == 2
    failing, _ = _stub_kernel(monkeypatch, "Pi", (), results=(700,))
    with pytest.raises(driver.DriverError, match=r"cuLaunchKernel\(k\) failed: error 700"):
        failing((1, 1, 1), (32, 1, 1), (0xA000, 3))
