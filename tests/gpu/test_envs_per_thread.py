"""Step kernels built with E envs per thread (``GPU_VECENV_ENVS_PER_THREAD`` = 2, 4), and the
small-launch step kernel (``<name>_step_small``), against the one-env-per-thread
``<name>_step`` on the GPU: bit-identical outputs and buffers at every step
of a roll-out with 3 % invalid actions, in every autoreset mode, at sizes that take the
block path throughout (4,096), with value-by-value state rows and a tail (4,099), and a
single env."""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv.backends import cuda as cuda_backend
from gpu_vecenv.entry_points import make_vec

from .classic import CLASSIC_IDS, MODES, random_actions

pytestmark = pytest.mark.gpu


def _make(env_id, n, mode, per_thread, monkeypatch, small=False):
    """With ``small``, the env steps with ``<name>_step_small`` (one env per thread, seeds
    and RNG counters loaded up front) whatever ``n``; else with ``<name>_step``."""
    monkeypatch.setenv("GPU_VECENV_ENVS_PER_THREAD", str(per_thread))
    monkeypatch.setattr(cuda_backend, "SMALL_STEP_MAX_ENVS", 2**31 if small else 0)
    env = make_vec(env_id, n, backend="cuda", device="cuda", autoreset_mode=mode,
                   strict=False, copy=False)
    assert env.backend.envs_per_thread == per_thread
    assert env.backend._step_fn.name.endswith("_step_small" if small else "_step")
    return env


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("per_thread", [2, 4, "small"])
@pytest.mark.parametrize("n", [4096, 4099, 1])
def test_envs_per_thread_steps_bit_for_bit_like_one(env_id, mode, per_thread, n, monkeypatch):
    one = _make(env_id, n, mode, 1, monkeypatch)
    many = (_make(env_id, n, mode, 1, monkeypatch, small=True) if per_thread == "small"
            else _make(env_id, n, mode, per_thread, monkeypatch))
    one.reset(seed=5)
    many.reset(seed=5)
    gen = torch.Generator(device="cuda").manual_seed(n)
    names = ["obs", "reward", "terminated", "truncated"] + (
        ["final_obs"] if one._outputs.final_obs is not None else [])
    for t in range(200):
        action = random_actions(one, gen, invalid_fraction=0.03)
        # The backends directly: step() would raise the invalid actions' deferred error.
        one.backend.step(action, one._outputs)
        many.backend.step(action, many._outputs)
        for name in names:
            assert torch.equal(_bits(getattr(one._outputs, name)),
                               _bits(getattr(many._outputs, name))), f"step {t}: {name}"
    for name in ("elapsed", "rng_counter", "autoreset_pending", "invalid_action",
                 "error_count"):
        assert torch.equal(getattr(one.buffers, name), getattr(many.buffers, name)), name
    for name, value in one.buffers.state.items():
        assert torch.equal(_bits(value), _bits(many.buffers.state[name])), name
    assert int(one.buffers.error_count) > 0 or n == 1
