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
