"""``gv_div_positive`` (cuda_src/common/math.cuh) against IEEE division, bit for bit, on the
CPU: the kernels call it for their normalising divisions, where a zero numerator must give
what ``a / b`` gives (a signed zero) without the division's slow path."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpu_vecenv.backends.compiler import CUDA_SRC

SHIM = Path(__file__).resolve().parent / "tag_emulation" / "shim.h"

PROGRAM = r"""
#include "shim.h"
#include "common/math.cuh"
#include <cstdio>
#include <cstring>
static unsigned bits(float v) { unsigned u; std::memcpy(&u, &v, 4); return u; }
int main() {
  unsigned pair[2];
  long mismatches = 0, checked = 0;
  while (std::fread(pair, 4, 2, stdin) == 2) {
    float a, b;
    std::memcpy(&a, &pair[0], 4);
    std::memcpy(&b, &pair[1], 4);
    const float want = a / b, got = gv_div_positive(a, b);
    const bool same = bits(want) == bits(got) || (want != want && got != got);
    if (!same && mismatches++ < 5) std::printf("a=%08x b=%08x want=%08x got=%08x\n",
                                               pair[0], pair[1], bits(want), bits(got));
    ++checked;
  }
  std::printf("checked %ld mismatches %ld\n", checked, mismatches);
  return mismatches != 0;
}
"""


def _f32_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ is not installed")
    out = tmp_path_factory.mktemp("div_positive")
    (out / "main.cpp").write_text(PROGRAM)
    exe = out / "main"
    subprocess.run([compiler, "-std=c++20", "-O1", "-ffp-contract=off", f"-I{CUDA_SRC}",
                    f"-I{SHIM.parent}", str(out / "main.cpp"), "-o", str(exe)], check=True,
                   capture_output=True)
    return exe


def test_equals_division_for_every_kind_of_numerator_and_positive_divisor(program):
    # the divisors the kernels use (sqrt(2) * L, max_speed + 1e-10, 2 pi, episode lengths)
    # and the extremes of positive floats
    divisors = [14.142136, 1.0, 6.2831855, 500.0, 28.284271, 3.0, 1.4e-45, 1.1754944e-38,
                3.4028235e38, float("inf")]
    specials = [0.0, -0.0, 1.4e-45, -1.4e-45, 1.1754944e-38, 3.4028235e38, -3.4028235e38,
                float("inf"), float("-inf"), float("nan"), 1.0, -1.0, 0.5, 7.25]
    rng = np.random.default_rng(0)
    numerators = np.concatenate([
        np.array([_f32_bits(v) for v in specials], dtype=np.uint32),
        rng.integers(0, 2**32, size=200_000, dtype=np.uint32),  # every exponent and sign
    ])
    pairs = np.stack(np.broadcast_arrays(
        numerators[None, :], np.array([_f32_bits(b) for b in divisors], dtype=np.uint32)[:, None]),
        axis=-1).reshape(-1, 2)
    result = subprocess.run([str(program)], input=pairs.astype("<u4").tobytes(),
                            capture_output=True, check=False)
    summary = result.stdout.decode()
    assert result.returncode == 0, summary
    assert f"checked {len(pairs)} mismatches 0" in summary


def test_a_zero_numerator_keeps_its_sign(program):
    pairs = np.array([[_f32_bits(-0.0), _f32_bits(2.0)], [_f32_bits(0.0), _f32_bits(2.0)]],
                     dtype="<u4")
    result = subprocess.run([str(program)], input=pairs.tobytes(), capture_output=True,
                            check=False)
    assert result.returncode == 0 and b"checked 2 mismatches 0" in result.stdout
