"""PettingZoo views: the one-game numpy adapter (PettingZoo's own tests) and the batched view."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from pettingzoo.test import parallel_api_test, parallel_seed_test

import gpu_vecenv
from gpu_vecenv.adapters.pettingzoo import parallel_env
from tests.tag.makers import PREDATOR_PREY

CASES = [
    ("GPUTag-v0", {}),
    ("GPUTag-v0", dict(num_runners=4, tagging_distance=0.2, use_full_observation=False,
                       num_other_agents_observed=3)),
    ("GPUTagGrid-v0", dict(num_taggers=3, grid_length=4)),
    ("GPUTagGrid-v0", dict(use_full_observation=False, random_start=True)),
]


@pytest.mark.parametrize(("env_id", "params"), CASES)
def test_parallel_api_and_seed_tests(env_id, params):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(parallel_env(env_id, **params), num_cycles=200)
    parallel_seed_test(lambda: parallel_env(env_id, **params), num_cycles=100)


def test_agents_leave_as_they_are_tagged():
    env = parallel_env("GPUTag-v0", num_taggers=2, num_runners=6, tagging_distance=0.3,
                       episode_length=50)
    obs, infos = env.reset(seed=0)
    assert env.agents == env.possible_agents and infos["runner_0"] == {"role": "runner"}
    assert obs["tagger_0"].dtype == np.float32
    env.action_space("tagger_0").seed(0)
    seen_leaving = False
    while env.agents:
        live = list(env.agents)
        _, rewards, terms, truncs, _ = env.step(
            {a: env.action_space(a).sample() for a in env.agents})
        assert set(rewards) == set(live)
        gone = [a for a in live if terms[a] or truncs[a]]
        assert env.agents == [a for a in live if a not in gone]
        seen_leaving |= bool(gone) and bool(env.agents)
    assert seen_leaving  # some runner left before the game ended
    with pytest.raises(ValueError, match="missing"):
        env.reset(seed=1)
        env.step({})


def test_batched_parallel_env_dicts_of_game_tensors():
    env = gpu_vecenv.parallel_env("GPUTag-v0", num_games=4, device="cpu", num_runners=3,
                                  autoreset_mode="same_step")
    obs, infos = env.reset(seed=0)
    assert env.agents == ["tagger_0", "runner_0", "runner_1", "runner_2"]
    assert obs["runner_1"].shape == (4, env.observation_space("runner_1").shape[0])
    assert infos["tagger_0"]["active"].shape == (4,)
    flat, _ = env.vec.reset(seed=0)
    torch.testing.assert_close(obs["runner_1"], flat.view(4, 4, -1)[:, 2])
    actions = {a: torch.zeros(4, 2, dtype=torch.int64) for a in env.agents}
    obs, rewards, terms, truncs, infos = env.step(actions)
    assert rewards["runner_0"].shape == (4,) and terms["tagger_0"].dtype == torch.bool
    assert infos["runner_0"]["final_obs"].shape == obs["runner_0"].shape
    with pytest.raises(ValueError, match="missing"):
        env.step({"tagger_0": torch.zeros(4, 2, dtype=torch.int64)})
    grid = gpu_vecenv.parallel_env("GPUTagGrid-v0", num_games=2, device="cpu", num_taggers=2)
    grid.reset(seed=0)
    out = grid.step({a: np.ones(2, np.int64) for a in grid.agents})
    assert out[0]["runner_0"].shape == (2, 13)
    with pytest.raises(TypeError, match="single-agent"):
        gpu_vecenv.parallel_env("GPUCartPole-v1", num_games=2, device="cpu")


def test_one_game_of_any_multi_agent_env_by_its_roles():
    gpu_vecenv.register("PredatorPrey-v0", PREDATOR_PREY, kwargs={"num_taggers": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(parallel_env("PredatorPrey-v0"), num_cycles=50)
    env = parallel_env("PredatorPrey-v0")
    _, infos = env.reset(seed=0)
    assert env.possible_agents == ["predator_0", "predator_1", "prey_0"]
    assert infos["prey_0"] == {"role": "prey"} and infos["predator_1"] == {"role": "predator"}
