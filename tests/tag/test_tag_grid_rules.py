"""Gridworld Tag's torch reference against scenarios worked out by hand (docs/tag_rules.md)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpu_vecenv.envs.tag_grid import TagGridParams, observe, reset, step

STAY, RIGHT, LEFT, UP, DOWN = range(5)
F32 = np.float32


def game(x, y, t=0):
    return {"x": torch.tensor([x], dtype=torch.int32), "y": torch.tensor([y], dtype=torch.int32),
            "t": torch.tensor([t], dtype=torch.int32)}


def act(*moves):
    return torch.tensor([moves], dtype=torch.int64)


def test_each_action_moves_one_cell():
    p = TagGridParams(num_taggers=4, grid_length=10)
    r = step(p, game([5, 5, 5, 5, 0], [5, 5, 5, 5, 9]), act(RIGHT, LEFT, UP, DOWN, STAY))
    assert r.state["x"][0].tolist() == [6, 4, 5, 5, 0]
    assert r.state["y"][0].tolist() == [5, 5, 6, 4, 9]
    assert r.state["t"].tolist() == [1]


def test_wall_hits_are_clipped_and_penalised():
    p = TagGridParams(num_taggers=2, grid_length=4, wall_hit_penalty=0.5,
                      step_cost_for_tagger=0.25)
    r = step(p, game([4, 0, 2], [4, 0, 0]), act(RIGHT, DOWN, DOWN))
    assert r.state["x"][0].tolist() == [4, 0, 2] and r.state["y"][0].tolist() == [4, 0, 0]
    assert r.reward[0].tolist() == [-0.75, -0.75, -0.5 + 0.25]
    assert not r.terminated[0]


def test_tag_rewards_every_tagger_and_ends_the_game():
    p = TagGridParams(num_taggers=3, grid_length=10, wall_hit_penalty=0.5,
                      tag_reward_for_tagger=10.0, tag_penalty_for_runner=2.0)
    # tagger 0 steps onto the runner; tagger 2 hits the wall on the same step
    r = step(p, game([3, 8, 10, 4], [3, 8, 0, 3]), act(RIGHT, STAY, RIGHT, STAY))
    assert r.reward[0].tolist() == [10.0, 10.0, 9.5, -2.0]
    assert r.terminated.tolist() == [True]


def test_agents_that_swap_cells_do_not_tag():
    p = TagGridParams(num_taggers=1, grid_length=10, step_cost_for_tagger=0.01)
    r = step(p, game([3, 4], [3, 3]), act(RIGHT, LEFT))
    assert r.state["x"][0].tolist() == [4, 3]
    assert not r.terminated[0]
    assert r.reward[0].tolist() == [float(F32(-0.01)), float(F32(0.01))]


def test_truncated_at_the_episode_length():
    p = TagGridParams(num_taggers=1, episode_length=3)
    r = step(p, game([0, 5], [0, 5], t=2), act(STAY, STAY))
    assert r.truncated.tolist() == [True] and r.terminated.tolist() == [False]


def test_fixed_and_random_starts():
    p = TagGridParams(num_taggers=2, grid_length=7)
    s = reset(p, torch.zeros(2, 3, 4))
    assert s["x"].tolist() == [[3, 3, 0], [3, 3, 0]] and s["y"].tolist() == s["x"].tolist()
    q = TagGridParams(num_taggers=2, grid_length=7, random_start=True)
    u = torch.tensor([[[0.0, 0.99999994, 0, 0], [0.5, 0.125, 0, 0], [0.25, 0.3, 0, 0]]])
    s = reset(q, u)
    assert s["x"][0].tolist() == [0, 4, 2] and s["y"][0].tolist() == [7, 1, 2]


def test_full_observation_layout():
    p = TagGridParams(num_taggers=2, grid_length=4, episode_length=8)
    obs = observe(p, game([0, 2, 4], [1, 3, 4], t=2))[0].numpy()
    expected_shared = [0, 0.5, 1, 0.25, 0.75, 1, 0, 0, 1]
    np.testing.assert_array_equal(obs[1], np.array(expected_shared + [0, 1, 0, 0.25], F32))
    np.testing.assert_array_equal(obs[2], np.array(expected_shared + [0, 0, 1, 0.25], F32))


def test_partial_observation_targets():
    p = TagGridParams(num_taggers=3, grid_length=4, episode_length=8, use_full_observation=False)
    # runner at (2, 2); taggers 0 and 2 are both at squared distance 2, tagger 1 at 4:
    # the runner's target is tagger 0 (lowest id on ties); every tagger targets the runner.
    obs = observe(p, game([1, 2, 3, 2], [1, 4, 3, 2], t=4))[0].numpy()
    np.testing.assert_array_equal(obs[0], np.array([0.25, 0.25, 0.5, 0.5, 0, 0.5], F32))
    np.testing.assert_array_equal(obs[1], np.array([0.5, 1.0, 0.5, 0.5, 0, 0.5], F32))
    np.testing.assert_array_equal(obs[3], np.array([0.5, 0.5, 0.25, 0.25, 1, 0.5], F32))


def test_preset_and_validation():
    p = TagGridParams.warpdrive_training()
    assert (p.num_taggers, p.grid_length, p.tag_penalty_for_runner) == (4, 100, 5.0)
    assert TagGridParams().obs_dim == 4 * 11 + 1
    with pytest.raises(ValueError, match="grid_length"):
        TagGridParams(grid_length=0)
