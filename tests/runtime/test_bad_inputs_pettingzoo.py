"""Bad actions given to the PettingZoo views of the multi-agent envs (issue 32): the
batched ``gpu_vecenv.parallel_env`` (``{agent: [G, ...]}`` tensors) and the one-game
numpy adapter (``gpu_vecenv.adapters.pettingzoo``). Each raises the documented error
type at once, naming the agent, and leaves the env bit-identical to a twin that never saw
the call; on the torch backend and on the CUDA kernels (``gpu``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import gpu_vecenv
from gpu_vecenv.adapters.pettingzoo import parallel_env as numpy_parallel_env
from tests.runtime.twins import BACKENDS, NUM, assert_refused, valid_actions

MULTI_AGENT_IDS = ["GPUTag-v0", "GPUTagGrid-v0"]
FIRST = "tagger_0"


def _device(backend: str) -> str:
    return "cpu" if backend == "torch" else "cuda"


# -- the batched view: {agent: [num_games, ...]} --


def _batched(env_id: str, backend: str):
    env = gpu_vecenv.parallel_env(env_id, num_games=NUM, device=_device(backend),
                                  backend=backend, strict=True)
    env.reset(seed=3)
    env.step(_batched_actions(env, 0))
    return env


def _batched_actions(env, t: int) -> dict[str, torch.Tensor]:
    return env._split(valid_actions(env.vec, t))


def _replace(agent: str, value: Callable[[Any], Any]) -> Callable[[Any], dict[str, Any]]:
    """Valid actions, but ``agent``'s is ``value(env)``."""
    return lambda env: {**_batched_actions(env, 1), agent: value(env)}


def _first_shape(env) -> tuple[int, ...]:
    return _batched_actions(env, 1)[FIRST].shape


BATCHED_CASES = {
    "actions None": (lambda env: None, TypeError, r"actions must be a dict"),
    "a bare tensor": (lambda env: valid_actions(env.vec, 1), TypeError,
                      r"actions must be a dict .*got Tensor"),
    "a list": (lambda env: list(_batched_actions(env, 1).values()), TypeError,
               r"actions must be a dict .*got list"),
    "an agent missing": (lambda env: {a: v for a, v in _batched_actions(env, 1).items()
                                      if a != FIRST},
                         ValueError, r"missing \['tagger_0'\]"),
    "an unknown agent": (lambda env: {**_batched_actions(env, 1), "referee": 0}, ValueError,
                         r"unknown \['referee'\]"),
    "value None": (_replace(FIRST, lambda env: None), TypeError,
                   r"actions\['tagger_0'\] must be a tensor.*got NoneType"),
    "value a str": (_replace(FIRST, lambda env: "up"), TypeError,
                    r"actions\['tagger_0'\] must be a tensor.*got str"),
    "ragged value": (_replace(FIRST, lambda env: [[0]] * (NUM - 1) + [[0, 1]]), ValueError,
                     r"actions\['tagger_0'\] is a ragged sequence"),
    "one game too many": (_replace(FIRST, lambda env: torch.zeros(
        (NUM + 1, *_first_shape(env)[1:]), dtype=torch.int64)), ValueError,
        r"actions\['tagger_0'\] must be .*got shape"),
    "float value": (_replace(FIRST, lambda env: torch.zeros(_first_shape(env))), TypeError,
                    r"actions\['tagger_0'\] must be .*got dtype torch.float32"),
    "value on meta": (_replace(FIRST, lambda env: torch.zeros(
        _first_shape(env), dtype=torch.int64, device="meta")), ValueError,
        r"actions\['tagger_0'\] is on meta"),
    "value out of range": (_replace(FIRST, lambda env: torch.full(
        _first_shape(env), 99, dtype=torch.int64)), ValueError, r"not in range"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(BATCHED_CASES))
@pytest.mark.parametrize("env_id", MULTI_AGENT_IDS)
def test_batched_view_refuses_bad_actions_and_changes_nothing(env_id, case, backend):
    actions_of, error, match = BATCHED_CASES[case]
    env, twin = _batched(env_id, backend), _batched(env_id, backend)
    assert_refused(lambda: env.step(actions_of(env)), error, match)
    state, expected = env.get_state(), twin.get_state()
    for key in expected:
        assert torch.equal(state[key], expected[key]), key
    actions = _batched_actions(env, 1)
    got, want = env.step(actions), twin.step(actions)
    for got_dict, want_dict in zip(got[:4], want[:4], strict=True):
        for agent in env.possible_agents:
            assert torch.equal(got_dict[agent], want_dict[agent]), agent


# -- the one-game numpy adapter --


def _one_game(env_id: str, backend: str):
    env = numpy_parallel_env(env_id, device=_device(backend), backend=backend)
    env.reset(seed=3)
    env.step(_one_game_actions(env, 0))
    return env


def _one_game_actions(env, t: int) -> dict[str, np.ndarray]:
    slots = valid_actions(env._vec, t).cpu().numpy()
    return {agent: slots[i] for i, agent in enumerate(env.possible_agents)
            if agent in env.agents}


def _one(agent: str, value: Any) -> Callable[[Any], dict[str, Any]]:
    return lambda env: {**_one_game_actions(env, 1), agent: value}


ONE_GAME_CASES = {
    "actions None": (lambda env: None, TypeError, r"actions must be a dict"),
    "a bare array": (lambda env: np.stack(list(_one_game_actions(env, 1).values())),
                     TypeError, r"actions must be a dict .*got ndarray"),
    "an agent missing": (lambda env: {a: v for a, v in _one_game_actions(env, 1).items()
                                      if a != FIRST}, ValueError, r"missing \['tagger_0'\]"),
    "an unknown agent": (lambda env: {**_one_game_actions(env, 1), "referee": 0}, ValueError,
                         r"unknown \['referee'\]"),
    "value None": (_one(FIRST, None), TypeError, r"actions\['tagger_0'\] must be a tensor"),
    "value a str": (_one(FIRST, "up"), TypeError, r"actions\['tagger_0'\] must be a tensor"),
    "ragged value": (_one(FIRST, [[0], [0, 1]]), ValueError,
                     r"actions\['tagger_0'\] is a ragged sequence"),
    "value of the wrong shape": (_one(FIRST, np.zeros(3, dtype=np.int64)), ValueError,
                                 r"actions\['tagger_0'\] must be .*got shape \(3,\)"),
    "float value": (lambda env: {**_one_game_actions(env, 1), FIRST: _one_game_actions(
        env, 1)[FIRST].astype(np.float32)}, TypeError,
        r"actions\['tagger_0'\] must be .*got dtype torch.float32"),
    "int beyond 64 bits": (_one(FIRST, [2**70]), TypeError,
                           r"actions\['tagger_0'\] must hold numbers.*an int beyond 64 bits"),
    "value out of range": (lambda env: {**_one_game_actions(env, 1), FIRST: 99 + 0 *
                                        _one_game_actions(env, 1)[FIRST]}, ValueError,
                           r"not in range"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(ONE_GAME_CASES))
@pytest.mark.parametrize("env_id", MULTI_AGENT_IDS)
def test_numpy_adapter_refuses_bad_actions_and_changes_nothing(env_id, case, backend):
    actions_of, error, match = ONE_GAME_CASES[case]
    env, twin = _one_game(env_id, backend), _one_game(env_id, backend)
    assert_refused(lambda: env.step(actions_of(env)), error, match)
    assert env.agents == twin.agents
    state, expected = env._vec.get_state(), twin._vec.get_state()
    for key in expected:
        assert torch.equal(state[key], expected[key]), key
    actions = _one_game_actions(env, 1)
    got, want = env.step(actions), twin.step(actions)
    for got_dict, want_dict in zip(got[:4], want[:4], strict=True):
        assert got_dict.keys() == want_dict.keys()
        for agent, value in want_dict.items():
            assert np.array_equal(got_dict[agent], value), agent
