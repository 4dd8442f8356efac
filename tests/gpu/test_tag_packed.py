"""Tag's packed step (``step_one_block``'s packed form in cuda_src/tag.cu: ``32 // A`` games
of ``A <= 16`` agents a block of one warp) against one game a block: the same observations,
rewards, flags and state, bit for bit, over roll-outs with invalid actions and injected
states, in every autoreset mode; and against the torch reference; with and without the
observation options (``tag_step_packed_<suffix>_options``). ``$GPU_VECENV_TAG_PACKED`` picks it
per env (read when the backend is built)."""

from __future__ import annotations

import math

import pytest
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.envs import tag_launch
from tests.gpu.test_tag_kernels import (
    MODES,
    OPTIONS,
    assert_matches_reference,
    assert_same_rollouts,
    tag_params,
)
from tests.tag.makers import make_tag

pytestmark = pytest.mark.gpu

SIZES = [  # games, agents, K (None: min(10, A - 1); 0: full observations)
    (2000, 5, None),  # 6 games a block, the last block of 2
    (7, 5, 4), (13, 16, 10), (33, 2, None), (9, 11, 0), (12, 8, 3), (5, 3, 0), (2, 16, 0)]


def _env(games, agents, k, mode, packed, monkeypatch, **extra):
    monkeypatch.setenv("GPU_VECENV_TAG_PACKED", packed)
    params = tag_params(agents, full=k == 0)
    params["episode_length"] = 25
    if k:
        params["num_other_agents_observed"] = k
    return make_tag(games, device="cuda", backend="cuda", strict=False, copy=False,
                    autoreset_mode=mode, **params, **extra)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize(("games", "agents", "k", "most", "options"),
                         [(*size, 32, None) for size in SIZES]
                         + [(2000, 5, None, 3, None), (13, 8, 5, 3, None)]
                         + [(*size, 32, "both") for size in SIZES[:6]]
                         + [(13, 8, 5, 3, "egocentric"), (9, 11, 0, 32, "own_state")])
def test_packed_step_bit_for_bit_like_one_game_a_block(games, agents, k, most, options, mode,
                                                       monkeypatch):
    """``most``: the most games a block (32: as many as fit, ``32 // A``)."""
    extra = OPTIONS.get(options, {})
    on = _env(games, agents, k, mode, str(most), monkeypatch, **extra)
    off = _env(games, agents, k, mode, "1", monkeypatch, **extra)
    per_block = min(most, 32 // agents, games)
    assert on.backend.games_per_step_block == per_block
    assert on.backend._step_grid[0] == math.ceil(games / per_block)
    assert off.backend.games_per_step_block == 1
    assert_same_rollouts(on, off, seed=games * 131 + agents)


@pytest.mark.parametrize(("games", "agents", "k", "options"), [
    (2000, 5, None, None), (7, 16, 0, None), (31, 3, 2, None), (2000, 5, None, "both"),
    (7, 16, 0, "both"), (31, 3, 2, "egocentric"), (13, 16, 10, "own_state")])
def test_packed_step_matches_the_torch_reference(games, agents, k, options, monkeypatch):
    extra = OPTIONS.get(options, {})
    cuda = _env(games, agents, k, AutoresetMode.NEXT_STEP, "32", monkeypatch, **extra)
    assert cuda.backend.games_per_step_block > 1
    params = tag_params(agents, full=k == 0, **extra)
    params["episode_length"] = 25
    if k:
        params["num_other_agents_observed"] = k
    assert_matches_reference(cuda, params)


def test_auto_packs_games_where_one_a_block_would_crowd_the_sms(monkeypatch):
    monkeypatch.setenv("GPU_VECENV_TAG_PACKED", "auto")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    per_sm = tag_launch.PACKED_BLOCKS_PER_SM

    def games_per_block(games, agents):
        env = make_tag(games, device="cuda", backend="cuda", **tag_params(agents, False))
        return env.backend.games_per_step_block

    assert games_per_block(1, 5) == 1
    assert games_per_block(per_sm * sms, 5) == 1
    assert games_per_block(per_sm * sms + 1, 5) == 2
    assert games_per_block(3 * per_sm * sms, 5) == 3
    assert games_per_block(100 * per_sm * sms, 5) == 6  # 32 // 5
    assert games_per_block(100 * per_sm * sms, 17) == 1  # too large to pack
    monkeypatch.setenv("GPU_VECENV_TAG_PACKED", "sometimes")
    with pytest.raises(ValueError, match="GPU_VECENV_TAG_PACKED must be auto or the most"):
        make_tag(4, device="cuda", backend="cuda", **tag_params(5, False))
