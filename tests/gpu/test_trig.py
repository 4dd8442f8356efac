"""``gv_sinf`` and ``gv_cosf`` (``cuda_src/common/math.cuh``: the library's common path
inline, its far-argument reduction out of line) are ``sinf`` and ``cosf`` bit for bit on
every float32 input, under the flags every kernel is built with."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gpu_vecenv.backends.compiler import load_module
from gpu_vecenv.backends.launch import Kernel

pytestmark = pytest.mark.gpu

SOURCE = Path(__file__).with_name("trig_all_inputs.cu")


def _mismatches(start: int, count: int, flags: tuple[str, ...] = ()):
    """``(counts, first)``: inputs whose sin (cos) bits differ from the library's, and the
    smallest such bit pattern of each (``0xffffffff``: none), over ``[start, start+count)``."""
    module = load_module("trig_all_inputs", torch.cuda.current_device(), path=SOURCE,
                         extra_flags=flags)
    kernel = Kernel(module, "trig_mismatches", "PPQQ")
    counts = torch.zeros(2, dtype=torch.int64, device="cuda")
    first = torch.full((2,), -1, dtype=torch.int32, device="cuda")
    kernel((4096, 1, 1), (256, 1, 1), (counts.data_ptr(), first.data_ptr(), start, count))
    torch.cuda.synchronize()
    return counts.tolist(), [v & 0xFFFFFFFF for v in first.tolist()]


def test_every_float32_input_gives_the_librarys_bits():
    counts, first = _mismatches(0, 1 << 32)
    assert counts == [0, 0], (f"sin differs on {counts[0]} inputs (first 0x{first[0]:08x}), "
                              f"cos on {counts[1]} (first 0x{first[1]:08x})")


@pytest.mark.parametrize("start", [0x3F800000, 0x47CE4780, 0xFF800000])  # 1.0, 105615, -inf
def test_the_comparison_counts_every_differing_input(start):
    """Against the library's results with their lowest bit flipped, every input of a range
    counts, on the inline path (from 1.0), the far one (from 105615) and at -inf and NaN."""
    count = min(1 << 16, (1 << 32) - start)
    counts, first = _mismatches(start, count, ("-DGV_TRIG_REFERENCE_OFF_BY_ONE",))
    assert counts == [count, count] and first == [start, start]
