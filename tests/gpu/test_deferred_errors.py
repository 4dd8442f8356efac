"""Deferred invalid-action reports reach the host without a sync or an explicit check."""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv import make_vec
from gpu_vecenv.actions import InvalidActionError
from gpu_vecenv.vector_env import GpuVectorEnv

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("backend", ["cuda", "torch"])
def test_deferred_error_surfaces_within_a_few_steps(backend):
    env = make_vec("GPUCartPole-v1", 64, device="cuda", backend=backend, strict=False)
    env.reset(seed=0)
    good = torch.zeros(64, dtype=torch.int64, device="cuda")
    bad = good.clone()
    bad[5] = 9
    before = env.get_state()
    env.step(bad)
    after = env.get_state()
    for key in before:
        assert torch.equal(before[key][5], after[key][5]), key
    assert not torch.equal(before["x"], after["x"]), "the other envs stepped"
    steps = 0
    with pytest.raises(InvalidActionError, match="1 invalid action"):
        while steps < 4 * GpuVectorEnv.ERROR_FLAG_INTERVAL:
            steps += 1
            torch.cuda.synchronize()
            env.step(good)
    assert steps <= 2 * GpuVectorEnv.ERROR_FLAG_INTERVAL + 1
    env.step(good)  # reported once, then cleared
    env.check_errors()
