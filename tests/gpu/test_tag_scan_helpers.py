"""Tag's scan helpers (``observe_partial`` in cuda_src/tag.cu: threads p * A + a, 0 < p < H,
scan parts of agent a's candidates for its K nearest) against one thread per agent: the same
observations, rewards, flags and state, bit for bit, over roll-outs with invalid actions
and injected states, in every autoreset mode; and against the torch reference; with and
without the observation options (the helpers turn the slots they write into their agent's
frame). ``$GPU_VECENV_TAG_SCAN_HELPERS`` picks them per env (read when the backend is built)."""

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

SIZES = [  # games, agents, K (None: min(10, A - 1))
    (100, 105, None), (100, 105, 7), (7, 33, None), (3, 2, None), (5, 128, 16), (20, 64, 3),
    (9, 11, 10), (4, 5, 4)]


def _env(games, agents, k, mode, helpers, monkeypatch, **options):
    monkeypatch.setenv("GPU_VECENV_TAG_SCAN_HELPERS", helpers)
    params = tag_params(agents, full=False, **options)
    params["episode_length"] = 25
    if k is not None:
        params["num_other_agents_observed"] = k
    return make_tag(games, device="cuda", backend="cuda", strict=False, copy=False,
                    autoreset_mode=mode, **params)


@pytest.mark.parametrize("helpers", [1, 3])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize(("games", "agents", "k", "options"),
                         [(*size, None) for size in SIZES]
                         + [(100, 105, None, "both"), (7, 33, None, "both"), (3, 2, None, "both"),
                            (20, 64, 3, "egocentric"), (4, 5, 4, "own_state"),
                            (5, 128, 16, "both"), (9, 11, 1, "both")])
def test_scan_helpers_step_bit_for_bit_like_one_thread_per_agent(games, agents, k, options, mode,
                                                                  helpers, monkeypatch):
    extra = OPTIONS.get(options, {})
    on = _env(games, agents, k, mode, str(helpers), monkeypatch, **extra)
    off = _env(games, agents, k, mode, "0", monkeypatch, **extra)
    parts = min(helpers + 1, tag_launch.MAX_SPLIT_BLOCK // agents)
    assert on.backend.block == 32 * math.ceil(parts * agents / 32)
    assert off.backend.block == 32 * math.ceil(agents / 32)
    assert_same_rollouts(on, off, seed=games * 131 + agents)


@pytest.mark.parametrize(("games", "agents", "k", "helpers", "options"), [
    (100, 105, None, 3, None), (100, 105, None, 1, None), (7, 33, 5, 2, None),
    (100, 105, None, 3, "both"), (7, 33, 5, 2, "both"), (9, 11, 1, 1, "egocentric")])
def test_scan_helpers_match_the_torch_reference(games, agents, k, helpers, options,
                                                monkeypatch):
    extra = OPTIONS.get(options, {})
    cuda = _env(games, agents, k, AutoresetMode.NEXT_STEP, str(helpers), monkeypatch, **extra)
    if options:
        assert cuda.backend._fn.name.endswith("_helpers" + tag_launch.OPTIONS_SUFFIX)
    params = tag_params(agents, full=False, **extra)
    params["episode_length"] = 25
    if k is not None:
        params["num_other_agents_observed"] = k
    assert_matches_reference(cuda, params)


def test_auto_turns_scan_helpers_on_only_for_launches_of_at_most_one_block_per_sm(monkeypatch):
    monkeypatch.setenv("GPU_VECENV_TAG_SCAN_HELPERS", "auto")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    params = tag_params(105, full=False)
    few = make_tag(min(100, sms), device="cuda", backend="cuda", **params)
    many = make_tag(2000, device="cuda", backend="cuda", **params)
    full = make_tag(10, device="cuda", backend="cuda", **tag_params(105, full=True))
    assert few.backend.block == 32 * math.ceil(tag_launch.AUTO_SCAN_PARTS * 105 / 32)
    assert many.backend.block == 128 and full.backend.block == 128
