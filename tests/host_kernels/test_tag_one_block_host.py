"""cuda_src/tag.cu on the CPU (tag_emulation/: one std::thread per CUDA thread): a step in
one launch (``step_one_block``, registers, block reductions) against the same step run one
phase per launch (``run()``'s phases, global counters), bit for bit, in every autoreset
mode, with full and partial observations, staged rows or not, runners exiting or not,
invalid actions, ``reset()`` and ``observe()`` launches between steps; and the one-launch
step with scan helpers (2 to 4 threads per agent in the K-nearest scan) against it without
them; and the packed step (several small games a warp) against one game a block. The
float math is the host's libm, so this ties the paths to each other, not to the
GPU (the GPU tests tie them to the torch reference)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpu_vecenv.backends.compiler import CUDA_SRC
from gpu_vecenv.envs.tag_launch import SCAN_MAX_PARTS as MAX_PARTS

HERE = Path(__file__).resolve().parent / "tag_emulation"
CONFIGS = [  # games, agents, taggers, K (0: full observation)
    (3, 11, 3, 0), (4, 5, 1, 4), (2, 40, 4, 5), (2, 70, 7, 10)]


@pytest.fixture(scope="module")
def emulated_tag(tmp_path_factory) -> Path:
    """The harness built against the working tree's tag.cu (skips without g++)."""
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ is not installed")
    out = tmp_path_factory.mktemp("tag_emulation")
    layout = (CUDA_SRC / "tag_layout.cuh").read_text()
    probe = 'asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));'
    assert probe in layout, "tag_layout.cuh reads its shared memory size another way: update me"
    # tag_emu.cu includes the patched tag_layout.cuh beside it; tag_observe.cuh's include of
    # the original is then skipped (the same include guard)
    (out / "tag_layout.cuh").write_text(layout.replace(probe, "bytes = emu_smem_bytes;"))
    (out / "tag_emu.cu").write_text((CUDA_SRC / "tag.cu").read_text())
    exe = out / "harness"
    command = [compiler, "-std=c++20", "-O1", "-ffp-contract=off", "-pthread",
               f"-I{CUDA_SRC}", f"-I{out}", "-DTAG_ONLY", "-DTAG_ONLY_full", "-DTAG_ONLY_k4",
               "-DTAG_ONLY_k10", "-DEMU_SCAN_HELPERS", "-DTAG_ONLY_k4_helpers",
               "-DTAG_ONLY_k10_helpers", "-DEMU_PACKED", str(HERE / "harness.cpp"), "-o",
               str(exe)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 and "barrier" in result.stderr:
        pytest.skip("g++ without C++20 <barrier>")
    assert result.returncode == 0, result.stderr[-3000:]
    return exe


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["next_step", "same_step", "disabled"])
@pytest.mark.parametrize("staged", [0, 1], ids=["unstaged", "staged"])
def test_one_launch_step_equals_phase_per_launch(emulated_tag, tmp_path, mode, staged):
    for n, (games, agents, taggers, k) in enumerate(CONFIGS):
        exits = n % 2
        outputs = []
        for phased in (0, 1):
            out = tmp_path / f"{n}_{phased}.bin"
            args = [str(a) for a in (games, agents, taggers, k, mode, 8, 11 + n, staged, exits,
                                     0.02, phased, 256)]
            subprocess.run([str(emulated_tag), *args, str(out)], check=True,
                           capture_output=True, timeout=300)
            outputs.append(out.read_bytes())
        assert outputs[0] == outputs[1], f"{games} x {agents}, K={k}, exits={exits}"


HELPED = [  # games, agents, taggers, K, mode, staged, ties, phased
    (2, 105, 12, 10, 1, 1, 1, 0), (2, 105, 12, 7, 0, 0, 0, 0), (4, 5, 1, 4, 0, 0, 1, 0),
    (3, 11, 3, 10, 2, 1, 0, 0), (3, 33, 2, 7, 1, 0, 1, 0), (2, 40, 4, 5, 0, 1, 0, 1),
    (2, 128, 8, 8, 2, 0, 1, 0), (5, 2, 1, 1, 1, 1, 0, 0), (3, 64, 6, 3, 2, 1, 1, 0)]


@pytest.mark.parametrize(("games", "agents", "taggers", "k", "mode", "staged", "ties",
                          "phased"), [  # 100 agents or more: 25-35 s each on 2 cores
    pytest.param(*case, marks=pytest.mark.slow) if case[1] >= 100 else case for case in HELPED])
def test_scan_helpers_change_nothing(emulated_tag, tmp_path, games, agents, taggers, k, mode,
                                     staged, ties, phased):
    """Odd and even A, K below kMax and K = A - 1, tied distances (``ties``: agents on a
    grid of whole numbers, half of them still), every autoreset mode, staged or not."""
    outputs = {}
    for helpers in range(MAX_PARTS):  # helpers per agent: 0 (one thread per agent) to 3
        if (helpers + 1) * agents > 1024:
            continue
        out = tmp_path / f"{helpers}.bin"
        args = [str(a) for a in (games, agents, taggers, k, mode, 8, agents + k, staged,
                                 agents % 2, 0.03, phased, 1024, out, helpers, ties)]
        subprocess.run([str(emulated_tag), *args], check=True, capture_output=True, timeout=300)
        outputs[helpers] = out.read_bytes()
    assert len(outputs) >= 3
    for helpers, output in outputs.items():
        assert output == outputs[0], f"{helpers} helpers per agent"



PACKED = [  # games, agents, taggers, K (0: full observation), mode, staged, ties, per block
    (7, 5, 1, 4, 0, 1, 0, 6),     # a full block and one of 1 game
    (13, 5, 2, 4, 1, 0, 1, 6),    # 3 blocks, the last of 1 game; tied distances
    (5, 16, 3, 10, 2, 1, 1, 2),   # the last game alone
    (4, 11, 3, 0, 1, 1, 0, 2),    # full observations; 10 idle threads a block
    (6, 11, 2, 10, 0, 0, 0, 2),   # K = A - 1
    (33, 2, 1, 1, 2, 1, 1, 16),   # the last block holds 1
    (9, 3, 1, 2, 1, 0, 0, 10),    # one block, partly filled
    (12, 8, 2, 0, 0, 0, 1, 4),    # full blocks only
    (11, 5, 1, 4, 2, 1, 1, 3),    # fewer games than fit (17 idle threads)
    (10, 4, 1, 3, 1, 1, 0, 5)]    # 12 idle threads


@pytest.mark.parametrize(("games", "agents", "taggers", "k", "mode", "staged", "ties",
                          "per_block"), PACKED)
@pytest.mark.parametrize("exits", [0, 1], ids=["stay", "exit"])
def test_packed_step_changes_nothing(emulated_tag, tmp_path, games, agents, taggers, k, mode,
                                     staged, ties, per_block, exits):
    """The packed step (``per_block`` games a block of one warp, each game's reductions a
    warp vote over its threads) against one game a block, byte for byte, with invalid
    actions (a game with one stays as it was while the others of its block step),
    ``reset()`` and ``observe()`` between steps."""
    outputs = []
    for packed in (0, per_block):
        out = tmp_path / f"{packed}.bin"
        args = [str(a) for a in (games, agents, taggers, k, mode, 10, games + agents + k,
                                 staged, exits, 0.03, 0, 256, out, 0, ties, packed)]
        subprocess.run([str(emulated_tag), *args], check=True, capture_output=True, timeout=300)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
