"""Seeding of Tag games, and how bad inputs are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpu_vecenv.actions import InvalidActionError
from tests.tag.makers import make_tag, make_tag_grid


def rollout(env, seed, steps=15):
    obs, _ = env.reset(seed=seed)
    generator = torch.Generator().manual_seed(123)
    nvec = torch.as_tensor(env.single_action_space.nvec)
    out = [obs.clone()]
    for _ in range(steps):
        actions = (torch.rand((env.num_envs, 2), generator=generator) * nvec).long()
        obs, reward, *_ = env.step(actions)
        out += [obs.clone(), reward.clone()]
    return out


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def make(**kwargs):
    return make_tag(3, device="cpu", num_runners=4, tagging_distance=0.1, **kwargs)


def test_same_seed_same_run_different_seed_different_run():
    assert same(rollout(make(), 7), rollout(make(), 7))
    assert not same(rollout(make(), 7), rollout(make(), 8))


def test_games_differ_and_a_seed_list_matches_an_int():
    env = make()
    obs, _ = env.reset(seed=3)
    state = env.get_state()
    assert not torch.equal(state["x"][0], state["x"][1])
    obs_list, _ = env.reset(seed=[3, 3, 3])
    assert torch.equal(obs, obs_list)
    with pytest.raises(ValueError, match="num_games=3"):
        env.reset(seed=[1, 2])


def test_unseeded_reset_continues_the_stream():
    env = make()
    first, _ = env.reset(seed=11)
    second, _ = env.reset()
    assert not torch.equal(first, second)
    again, _ = make().reset(seed=11)
    assert torch.equal(first, again)


def test_start_state_distribution():
    env = make_tag(200, device="cpu", num_runners=9, grid_length=20.0)
    env.reset(seed=0)
    s = env.get_state()
    assert 0 <= s["x"].min() and s["x"].max() < 20 and s["y"].max() < 20
    dirs = torch.unique(s["direction"])
    torch.testing.assert_close(dirs, torch.tensor([0, np.pi / 2, np.pi, 3 * np.pi / 2],
                                                  dtype=torch.float32))
    assert s["speed"].eq(0).all() and s["acceleration"].eq(0).all() and s["in_game"].eq(1).all()
    assert abs(float(s["x"].mean()) - 10.0) < 0.3


def test_fixed_start_positions_repeat_across_episodes_and_games():
    env = make(fixed_start_positions=True)
    env.reset(seed=5)
    a = env.get_state()
    env.reset()
    b = env.get_state()
    assert torch.equal(a["x"], b["x"]) and torch.equal(a["x"][0], a["x"][2])
    env.reset(seed=6)
    assert not torch.equal(env.get_state()["x"], a["x"])


def test_grid_random_start_is_seeded():
    env = make_tag_grid(4, device="cpu", random_start=True)
    env.reset(seed=1)
    a = env.get_state()["x"]
    env.reset(seed=1)
    assert torch.equal(a, env.get_state()["x"])
    env.reset(seed=2)
    assert not torch.equal(a, env.get_state()["x"])


# -- bad inputs --

def test_wrong_shapes_and_dtypes_are_refused():
    env = make()
    env.reset(seed=0)
    n = env.num_envs
    for bad in (np.zeros((n, 3), np.int64), np.zeros((3, 5, 2), np.int64),
                np.zeros(n, np.int64), np.zeros((n, 2), np.float32), [["a", "b"]] * n):
        with pytest.raises(InvalidActionError):
            env.step(bad)
    grid = make_tag_grid(2, device="cpu")
    grid.reset(seed=0)
    with pytest.raises(InvalidActionError):
        grid.step(np.zeros((grid.num_envs, 1), np.int64))


def test_out_of_range_actions_strict_change_nothing():
    env = make()
    env.reset(seed=0)
    before = env.get_state()
    actions = np.zeros((env.num_envs, 2), np.int64)
    actions[7, 1] = env.single_action_space.nvec[1]
    with pytest.raises(InvalidActionError, match="nothing was stepped"):
        env.step(actions)
    actions[7, 1] = -1
    with pytest.raises(InvalidActionError):
        env.step(actions)
    after = env.get_state()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_out_of_range_actions_deferred_leave_their_game_unchanged():
    env = make_tag_grid(3, device="cpu", strict=False)
    env.reset(seed=0)
    before = env.get_state()
    actions = np.ones(env.num_envs, np.int64)
    actions[env.num_agents + 2] = 5  # game 1
    with pytest.raises(InvalidActionError, match="slots \\[13\\]"):
        env.step(actions)
    after = env.get_state()
    assert torch.equal(after["x"][1], before["x"][1]) and after["t"].tolist() == [1, 0, 1]
    env.step(np.ones(env.num_envs, np.int64))  # the error was reported once


def test_bad_constructor_arguments():
    with pytest.raises(TypeError, match="unknown parameter"):
        make_tag(1, device="cpu", num_taggerz=2)
    with pytest.raises(ValueError, match="unknown preset"):
        make_tag(1, device="cpu", preset="fast")
    with pytest.raises(ValueError, match=">= 1"):
        make_tag(0, device="cpu")
    with pytest.raises(TypeError):
        make_tag(2.5, device="cpu")
    with pytest.raises(ValueError, match="autoreset_mode"):
        make_tag(1, device="cpu", autoreset_mode="sometimes")
    with pytest.raises(ValueError, match="render_game"):
        make_tag(2, device="cpu", render_game=2)
    with pytest.raises(ValueError, match="disagree"):
        make_tag(1, device="cpu", max_episode_steps=5, episode_length=6)


def test_bad_reset_and_state_arguments():
    env = make()
    with pytest.raises(Exception, match="reset"):
        env.step(np.zeros((env.num_envs, 2), np.int64))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.reset(options={"reset_mask": np.ones(4, bool)})
    with pytest.raises(TypeError):
        env.reset(options={"reset_mask": np.ones(3, np.int64)})
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"mask": np.ones(3, bool)})
    with pytest.raises(ValueError):
        env.reset(seed=-1)
    with pytest.raises(KeyError, match="unknown state key"):
        env.set_state({"z": torch.zeros(3, 5)})
    with pytest.raises(ValueError, match="shape"):
        env.set_state({"x": torch.zeros(3, 4)})
    with pytest.raises(TypeError):
        env.set_state({"in_game": torch.zeros(3, 5)})
