"""Twin envs for bad-input tests: two envs made and stepped alike, one of which then sees
a bad call; afterwards both must hold the same bits and step to the same outputs.

``BACKENDS`` runs a test on the torch backend (CPU) and on the CUDA kernels (``gpu``).
"""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

from gpu_vecenv import make_vec

NUM = 3
"""Envs (games, for a multi-agent id) per test env: small, so a test is quick."""

BACKENDS = [pytest.param("torch", id="torch"),
            pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


def make(env_id: str, backend: str, **kwargs):
    """``env_id`` with ``NUM`` envs, reset with seed 3 and stepped once (so time counters
    and states are not the reset ones); ``strict=True`` unless ``kwargs`` say otherwise."""
    device = "cpu" if backend == "torch" else "cuda"
    env = make_vec(env_id, NUM, device=device, backend=backend,
                   **{"strict": True, **kwargs})
    env.reset(seed=3)
    env.step(valid_actions(env, 0))
    return env


def valid_actions(env, t: int) -> torch.Tensor:
    """Canonical in-range actions for every slot, different per slot and per ``t``."""
    space, n = env.single_action_space, env.num_envs
    rows = torch.arange(n) + t
    if isinstance(space, gym.spaces.Discrete):
        action = rows % int(space.n) + int(space.start)
    elif isinstance(space, gym.spaces.MultiDiscrete):
        action = torch.stack([(rows * (d + 1)) % int(k) for d, k in
                              enumerate(space.nvec)], dim=1) + torch.as_tensor(space.start)
    else:
        low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
        fraction = (rows % 5).to(torch.float32) / 4
        action = low + (high - low) * fraction.reshape(n, *([1] * len(space.shape)))
    return action.to(device=env.device, dtype=env.actions.dtype)


def assert_same_state(env, twin) -> None:
    state, expected = env.get_state(), twin.get_state()
    assert state.keys() == expected.keys()
    for key, value in expected.items():
        assert state[key].dtype == value.dtype, key
        assert torch.equal(state[key], value), key


def assert_twins(env, twin) -> None:
    """Same state, bit for bit, and the same outputs of the next step."""
    assert_same_state(env, twin)
    action = valid_actions(env, 1)
    for got, expected in zip(env.step(action)[:4], twin.step(action)[:4], strict=True):
        assert torch.equal(got, expected)


def assert_refused(call, error: type[Exception], match: str) -> None:
    """``call()`` raises ``error`` with a message matching ``match``; a ``ValueError`` that
    is not also a ``TypeError`` (the type of a wrong type)."""
    with pytest.raises(error, match=match) as raised:
        call()
    if error is ValueError:
        assert not isinstance(raised.value, TypeError)
