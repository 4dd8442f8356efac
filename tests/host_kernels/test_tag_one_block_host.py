"""cuda_src/tag.cu on the CPU (tag_emulation/: one std::thread per CUDA thread): a step in
one launch (``step_one_block``, registers, block reductions) against the same step run one
phase per launch (``run()``'s phases, global counters), bit for bit, in every autoreset
mode, with full and partial observations, staged rows or not, runners exiting or not,
invalid actions, ``reset()`` and ``observe()`` launches between steps; and the one-launch
step with scan helpers (2 to 4 threads per agent in the K-nearest scan) against it without
them; and the packed step (several small games a warp) against one game a block; each
also with the observation options (``observe_own_state``, ``egocentric``: the ``_options``
kernels). The float math is the host's libm, so this ties the paths to each other, not to
the GPU (the GPU tests tie them to the torch reference), except for the observations, which
are compared with the torch reference's on the CPU: exactly where no cosine or sine enters
them, within 1e-6 where one does (the host's cosf and sinf against torch's CPU ones, which
may differ in the last bit)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from gpu_vecenv.backends.compiler import CUDA_SRC
from gpu_vecenv.envs import tag
from gpu_vecenv.envs.tag_launch import SCAN_MAX_PARTS as MAX_PARTS

HERE = Path(__file__).resolve().parent / "tag_emulation"
CONFIGS = [  # games, agents, taggers, K (0: full observation)
    (3, 11, 3, 0), (4, 5, 1, 4), (2, 40, 4, 5), (2, 70, 7, 10)]
OPTIONS = {"plain": (0, 0), "egocentric": (0, 1), "own_state": (1, 0),
           "own_state_egocentric": (1, 1)}
"""The harness's last two arguments: ``observe_own_state``, ``egocentric``."""


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
               "-DTAG_ONLY_k10_helpers", "-DEMU_PACKED", "-DEMU_OPTIONS", "-DTAG_ONLY_OPTIONS",
               "-DTAG_ONLY_PLAIN", str(HERE / "harness.cpp"), "-o", str(exe)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 and "barrier" in result.stderr:
        pytest.skip("g++ without C++20 <barrier>")
    assert result.returncode == 0, result.stderr[-3000:]
    return exe


MODES = {"next_step": 0, "same_step": 1, "disabled": 2}
ONE_LAUNCH = [(staged, mode, "plain") for staged in (0, 1) for mode in MODES] + [
    # the options' writers in every mode and both row sources, without every combination
    # (each case plays four games of up to 70 agents twice: 8-30 s on 2 cores)
    (0, "next_step", "own_state_egocentric"), (1, "same_step", "own_state_egocentric"),
    (0, "disabled", "own_state_egocentric"), (1, "next_step", "egocentric")]


@pytest.mark.parametrize(("staged", "mode", "options"), ONE_LAUNCH,
                         ids=[f"{'staged' if s else 'unstaged'}-{m}-{o}"
                              for s, m, o in ONE_LAUNCH])
def test_one_launch_step_equals_phase_per_launch(emulated_tag, tmp_path, mode, staged,
                                                 options):
    mode = MODES[mode]
    for n, (games, agents, taggers, k) in enumerate(CONFIGS):
        exits = n % 2
        outputs = []
        for phased in (0, 1):
            out = tmp_path / f"{n}_{phased}.bin"
            args = [str(a) for a in (games, agents, taggers, k, mode, 8, 11 + n, staged, exits,
                                     0.02, phased, 256, out, 0, 0, 0, *OPTIONS[options])]
            subprocess.run([str(emulated_tag), *args], check=True, capture_output=True,
                           timeout=300)
            outputs.append(out.read_bytes())
        assert outputs[0] == outputs[1], f"{games} x {agents}, K={k}, exits={exits}"


HELPED = [  # games, agents, taggers, K, mode, staged, ties, phased, options
    (2, 105, 12, 10, 1, 1, 1, 0, "plain"), (2, 105, 12, 7, 0, 0, 0, 0, "plain"),
    (4, 5, 1, 4, 0, 0, 1, 0, "plain"), (3, 11, 3, 10, 2, 1, 0, 0, "plain"),
    (3, 33, 2, 7, 1, 0, 1, 0, "plain"), (2, 40, 4, 5, 0, 1, 0, 1, "plain"),
    (2, 128, 8, 8, 2, 0, 1, 0, "plain"), (5, 2, 1, 1, 1, 1, 0, 0, "plain"),
    (3, 64, 6, 3, 2, 1, 1, 0, "plain"),
    (3, 33, 2, 7, 1, 1, 1, 0, "own_state_egocentric"),  # K = 1: part 1's lists hold cos/sin
    (5, 2, 1, 1, 0, 0, 0, 0, "own_state_egocentric"), (4, 5, 1, 4, 2, 1, 1, 0, "egocentric"),
    (3, 11, 3, 10, 1, 0, 0, 0, "own_state"), (2, 40, 4, 5, 0, 1, 0, 1, "own_state_egocentric"),
    (3, 64, 6, 3, 2, 0, 1, 0, "own_state_egocentric"),
    (2, 105, 12, 10, 0, 1, 0, 0, "own_state_egocentric")]


@pytest.mark.parametrize(("games", "agents", "taggers", "k", "mode", "staged", "ties",
                          "phased", "options"), [  # 100 agents or more: 25-35 s each on 2 cores
    pytest.param(*case, marks=pytest.mark.slow) if case[1] >= 100 else case for case in HELPED])
def test_scan_helpers_change_nothing(emulated_tag, tmp_path, games, agents, taggers, k, mode,
                                     staged, ties, phased, options):
    """Odd and even A, K below kMax and K = A - 1, tied distances (``ties``: agents on a
    grid of whole numbers, half of them still), every autoreset mode, staged or not, with
    and without the observation options (the helpers turn their slots egocentric with the
    cosine and sine their agent publishes)."""
    outputs = {}
    for helpers in range(MAX_PARTS):  # helpers per agent: 0 (one thread per agent) to 3
        if (helpers + 1) * agents > 1024:
            continue
        out = tmp_path / f"{helpers}.bin"
        args = [str(a) for a in (games, agents, taggers, k, mode, 8, agents + k, staged,
                                 agents % 2, 0.03, phased, 1024, out, helpers, ties, 0,
                                 *OPTIONS[options])]
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


PACKED_CASES = [(*case, exits, options) for n, case in enumerate(PACKED) for exits in (0, 1)
                for options in ("plain", "own_state_egocentric")
                if options == "plain" or exits == n % 2]  # the options: one of the two


@pytest.mark.parametrize(("games", "agents", "taggers", "k", "mode", "staged", "ties",
                          "per_block", "exits", "options"), PACKED_CASES)
def test_packed_step_changes_nothing(emulated_tag, tmp_path, games, agents, taggers, k, mode,
                                     staged, ties, per_block, exits, options):
    """The packed step (``per_block`` games a block of one warp, each game's reductions a
    warp vote over its threads) against one game a block, byte for byte, with invalid
    actions (a game with one stays as it was while the others of its block step),
    ``reset()`` and ``observe()`` between steps, with and without the observation options."""
    outputs = []
    for packed in (0, per_block):
        out = tmp_path / f"{packed}.bin"
        args = [str(a) for a in (games, agents, taggers, k, mode, 10, games + agents + k,
                                 staged, exits, 0.03, 0, 256, out, 0, ties, packed,
                                 *OPTIONS[options])]
        subprocess.run([str(emulated_tag), *args], check=True, capture_output=True, timeout=300)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


def read_dumps(path: Path, games: int, agents: int, taggers: int, obs_dim: int) -> list[dict]:
    """The harness's dumps (``dump()`` in harness.cpp: two a step, after the step and after
    ``reset()`` of some games and an ``observe()`` of all), as arrays."""
    n, g = games * agents, games
    layout = [("x", "<f4", n), ("y", "<f4", n), ("speed", "<f4", n), ("direction", "<f4", n),
              ("acceleration", "<f4", n), ("in_game", "<i4", n), ("t", "<i4", g),
              ("rng_counter", "<i8", g), ("pending", "u1", g), ("invalid", "u1", n),
              ("errors", "<i4", 1), ("obs", "<f4", n * obs_dim),
              ("final_obs", "<f4", n * obs_dim), ("reward", "<f4", n), ("terminated", "u1", n),
              ("truncated", "u1", n), ("active", "u1", n), ("game_bad", "<i4", g),
              ("runners_left", "<i4", g), ("game_ended", "<i4", g),
              ("tag_count", "<i4", g * taggers)]
    data, offset, dumps = path.read_bytes(), 0, []
    while offset < len(data):
        dump = {}
        for name, dtype, count in layout:
            dump[name] = np.frombuffer(data, dtype, count, offset)
            offset += dump[name].nbytes
        dumps.append(dump)
    assert offset == len(data)
    return dumps


@pytest.mark.parametrize("options", ["plain", "own_state", "egocentric",
                                     "own_state_egocentric"])
@pytest.mark.parametrize(("games", "agents", "taggers", "k", "block_cap"), [
    (3, 11, 3, 0, 256), (4, 5, 1, 4, 256), (2, 40, 4, 5, 256), (2, 40, 4, 5, 32),
    (2, 70, 7, 10, 32), (2, 40, 4, 0, 32)])
def test_observations_equal_the_torch_reference_on_the_cpu(emulated_tag, tmp_path, games,
                                                           agents, taggers, k, block_cap,
                                                           options):
    """The kernel's observation writer (``observe()``'s launch, one block a game or, with
    ``block_cap`` 32, several) against ``envs/tag.py``'s ``observe`` of the same state,
    over the states of a roll-out (runners out, resets, crowds, last steps), with the
    harness's visibility pattern. Bit for bit where no cosine or sine enters a value;
    within 1e-6 where one does (``egocentric``'s Δx and Δy, the own state's cos and sin):
    the host's cosf and sinf against torch's CPU cos and sin."""
    own_state, egocentric = OPTIONS[options]
    params = tag.TagParams(num_taggers=taggers, num_runners=agents - taggers, grid_length=10.0,
                           episode_length=6, max_speed=1.0, use_full_observation=k == 0,
                           num_other_agents_observed=k or 2, observe_own_state=bool(own_state),
                           egocentric=bool(egocentric))
    out = tmp_path / "dump.bin"
    args = [str(a) for a in (games, agents, taggers, k, 0, 8, agents + k + block_cap, 1, 1,
                             0.02, 1, block_cap, out, 0, 0, 0, own_state, egocentric)]
    subprocess.run([str(emulated_tag), *args], check=True, capture_output=True, timeout=300)
    D, n = params.obs_dim, params.num_observed
    trig = np.zeros(D, dtype=bool)  # the columns a cosine or sine enters
    if egocentric:
        trig[: 2 * n] = True
    if own_state:
        trig[tag.NUM_FEATURES * n + 3: tag.NUM_FEATURES * n + 5] = True
    dumps = read_dumps(out, games, agents, taggers, D)
    seen_out = 0
    for step, dump in enumerate(dumps[1::2]):  # after observe(): its visibility is known
        state = {name: torch.from_numpy(dump[name].reshape(games, agents).copy())
                 for name in ("x", "y", "speed", "direction", "acceleration", "in_game")}
        state["t"] = torch.from_numpy(dump["t"].copy())
        visible = (np.arange(games * agents) * 7 + step) % 3 != 0
        want = tag.observe(params, state).reshape(games * agents, D).numpy()
        want = np.where(visible[:, None], want, np.float32(0.0))
        got = dump["obs"].reshape(games * agents, D)
        np.testing.assert_array_equal(got[:, ~trig], want[:, ~trig], err_msg=f"step {step}")
        bits = got.view(np.uint32)[:, ~trig] == want.view(np.uint32)[:, ~trig]
        assert bits.all(), f"step {step}: the signs of zeros differ"  # -0.0 == 0.0 above
        np.testing.assert_allclose(got[:, trig], want[:, trig], rtol=0, atol=1e-6,
                                   err_msg=f"step {step}")
        zero = want[:, trig] == 0.0  # (cos and sin differ at most in their last bit)
        assert (np.signbit(got[:, trig]) == np.signbit(want[:, trig]))[zero].all(), step
        seen_out += int((visible & (dump["in_game"] == 0)).sum())
    assert len(dumps) == 16 and seen_out > 0  # observers out of the game were compared too
