"""Tag's packed step (``step_one_block``'s packed form in cuda_src/tag.cu: ``32 // A`` games
of ``A <= 16`` agents a block of one warp) against one game a block: the same observations,
rewards, flags and state, bit for bit, over roll-outs with invalid actions and injected
states, in every autoreset mode; and against the torch reference. ``$GPU_VECENV_TAG_PACKED``
picks it per env (read when the backend is built)."""

from __future__ import annotations

import math

import pytest
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.envs import tag
from gpu_vecenv.envs.tag import TagVectorEnv
from tests.gpu.test_tag_kernels import (
    MODES,
    compare_step,
    random_actions,
    random_tag_state,
    tag_params,
)

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
    return TagVectorEnv(games, device="cuda", backend="cuda", strict=False, copy=False,
                        autoreset_mode=mode, **params, **extra)


def _outputs(out):
    obs, reward, terminated, truncated, info = out
    parts = [obs, reward, terminated, truncated, info["active"]]
    if "final_obs" in info:
        parts.append(info["final_obs"])
    return [p.clone() for p in parts]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize(("games", "agents", "k", "most"),
                         [(*size, 32) for size in SIZES] + [(2000, 5, None, 3), (13, 8, 5, 3)])
def test_packed_step_bit_for_bit_like_one_game_a_block(games, agents, k, most, mode,
                                                       monkeypatch):
    """``most``: the most games a block (32: as many as fit, ``32 // A``)."""
    on = _env(games, agents, k, mode, str(most), monkeypatch)
    off = _env(games, agents, k, mode, "1", monkeypatch)
    per_block = min(most, 32 // agents, games)
    assert on.backend.games_per_step_block == per_block
    assert on.backend._step_grid[0] == math.ceil(games / per_block)
    assert off.backend.games_per_step_block == 1
    gen = torch.Generator(device="cuda").manual_seed(games * 131 + agents)
    for first, second in zip(on.reset(seed=7), off.reset(seed=7), strict=False):
        if isinstance(first, torch.Tensor):
            assert torch.equal(first, second)
    for step in range(80):
        if step % 20 == 10:  # crowds, runners out, pending resets, last steps
            state = random_tag_state(off, gen)
            assert torch.equal(on.set_state(state), off.set_state(state))
        # invalid actions in some games: they stay as they were, their block's others step
        actions = random_actions(off, gen, invalid=0.02 if step % 3 == 0 else 0.0)
        got, want = _outputs(on.step(actions)), _outputs(off.step(actions))
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a, b), f"step {step}"
        state_on, state_off = on.get_state(), off.get_state()
        for key in state_off:
            assert torch.equal(state_on[key], state_off[key]), f"step {step} {key}"
        assert torch.equal(on.buffers.invalid_action, off.buffers.invalid_action)
        assert torch.equal(on.buffers.error_count, off.buffers.error_count), f"step {step}"
        on.buffers.error_count.zero_()
        off.buffers.error_count.zero_()


@pytest.mark.parametrize(("games", "agents", "k"), [(2000, 5, None), (7, 16, 0), (31, 3, 2)])
def test_packed_step_matches_the_torch_reference(games, agents, k, monkeypatch):
    cuda = _env(games, agents, k, AutoresetMode.NEXT_STEP, "32", monkeypatch)
    assert cuda.backend.games_per_step_block > 1
    params = tag_params(agents, full=k == 0)
    params["episode_length"] = 25
    if k:
        params["num_other_agents_observed"] = k
    ref = TagVectorEnv(games, device="cuda", backend="torch", strict=False, **params)
    gen = torch.Generator(device="cuda").manual_seed(3)
    cuda.reset(seed=5)
    ref.reset(seed=5)
    for step in range(60):
        compare_step(cuda, ref, random_actions(ref, gen, invalid=0.01), f"step {step}")


def test_auto_packs_games_where_one_a_block_would_crowd_the_sms(monkeypatch):
    monkeypatch.setenv("GPU_VECENV_TAG_PACKED", "auto")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    per_sm = tag.PACKED_BLOCKS_PER_SM

    def games_per_block(games, agents):
        env = TagVectorEnv(games, device="cuda", backend="cuda", **tag_params(agents, False))
        return env.backend.games_per_step_block

    assert games_per_block(1, 5) == 1
    assert games_per_block(per_sm * sms, 5) == 1
    assert games_per_block(per_sm * sms + 1, 5) == 2
    assert games_per_block(3 * per_sm * sms, 5) == 3
    assert games_per_block(100 * per_sm * sms, 5) == 6  # 32 // 5
    assert games_per_block(100 * per_sm * sms, 17) == 1  # too large to pack
    monkeypatch.setenv("GPU_VECENV_TAG_PACKED", "sometimes")
    with pytest.raises(ValueError, match="GPU_VECENV_TAG_PACKED must be auto or the most"):
        TagVectorEnv(4, device="cuda", backend="cuda", **tag_params(5, False))
