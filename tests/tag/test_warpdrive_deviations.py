"""The two places where continuous Tag with ``observe_own_role=False`` deliberately differs
from WarpDrive (docs/tag_rules.md, "Where it differs from WarpDrive, and why"), pinned:

1. observations are made after the step's tags are resolved (WarpDrive observes after the
   move, before the tags), so they differ on every step with a tag, exactly as listed;
2. the action tables are the float32 nearest the exact levels (float64 ``linspace`` of the
   parameters, rounded once); WarpDrive rounds the end points to float32 first.

WarpDrive's observation is modelled with our ``observe`` on the state it sees: after the
move, with the tagged runner still in the game.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from gpu_vecenv.envs.tag import TagParams, observe, step
from tests.tag.test_tag_rules import LEVELS, game

F32 = np.float32


def tag_step(**params):
    """One step in which runner_0 (beside the tagger) is tagged and runner_1 (far) is not:
    ``(ours, warpdrive)`` observations, ``(A, obs_dim)``."""
    p = TagParams(num_taggers=1, num_runners=2, observe_own_role=False, **LEVELS, **params)
    state = game(x=[5.0, 5.05, 9.0], y=[5.0, 5.0, 1.0], speed=[0.0, 0.0, 0.3])
    result = step(p, state, torch.zeros((1, 3, 2), dtype=torch.int64))
    assert result.left[0].tolist() == [False, True, False]
    ours = observe(p, result.state)[0]
    before_tags = {**result.state, "in_game": state["in_game"]}
    return ours, observe(p, before_tags)[0]


def test_full_observations_differ_on_a_tag_step_exactly_as_documented():
    ours, warpdrive = tag_step(use_full_observation=True)
    # layout: 7 feature blocks of N - 1 = 2 others, then the time; block 6 is in_game
    flag_of_runner_0 = {0: 6 * 2 + 0, 2: 6 * 2 + 1}  # position of runner_0 in agent's obs
    for agent, position in flag_of_runner_0.items():
        assert (warpdrive[agent, position], ours[agent, position]) == (1.0, 0.0)
        others = [i for i in range(15) if i != position]
        assert torch.equal(ours[agent, others], warpdrive[agent, others])
    # the tagged runner: WarpDrive's in-game observation; ours its out-of-game one
    assert bool(warpdrive[1, :10].any()) and warpdrive[1, 14] == 1 / 100
    assert not bool(ours[1, :10].any()) and ours[1, 14] == 0.0
    assert torch.equal(ours[1, 10:14], warpdrive[1, 10:14])  # roles and in_game flags


def test_partial_observations_drop_the_tagged_runner_from_the_nearest():
    ours, warpdrive = tag_step(use_full_observation=False, num_other_agents_observed=1)
    x_block = 0  # K = 1: block f holds feature f of the one nearest other
    # the tagger: WarpDrive still sees runner_0 beside it, we see runner_1 (the only one left)
    assert warpdrive[0, x_block] == pytest.approx(0.05 / (math.sqrt(2) * 10), rel=1e-5)
    assert ours[0, x_block] == pytest.approx(4.3 / (math.sqrt(2) * 10), rel=1e-5)
    assert not bool(ours[1].any()) and bool(warpdrive[1].any())  # the runner that left
    role_block = 5  # runner_1's nearest: WarpDrive runner_0 (role 0), we the tagger (role 1)
    assert (warpdrive[2, role_block], ours[2, role_block]) == (0.0, 1.0)


def test_without_a_tag_the_observations_are_warpdrives():
    p = TagParams(num_taggers=1, num_runners=2, observe_own_role=False, **LEVELS)
    state = game(x=[1.0, 5.0, 9.0], y=[1.0, 5.0, 1.0])
    result = step(p, state, torch.zeros((1, 3, 2), dtype=torch.int64))
    assert not bool(result.left.any())
    before_tags = {**result.state, "in_game": state["in_game"]}
    assert torch.equal(observe(p, result.state), observe(p, before_tags))


def exact_levels(low: float, high: float, levels: int) -> list[float]:
    """The float32 nearest ``low + i (high - low) / (levels - 1)``, worked out exactly."""
    low, high = Fraction(low), Fraction(high)
    return [float(F32(float(low + i * (high - low) / (levels - 1)))) for i in range(levels)]


def warpdrive_table(low: float, high: float, levels: int) -> np.ndarray:
    """WarpDrive's construction under NumPy 1.x (float32 end points, float64 linspace)."""
    ends = np.float64(F32(low)), np.float64(F32(high))
    return np.insert(np.linspace(*ends, levels), 0, 0).astype(F32)


@pytest.mark.parametrize("preset", [None, "warpdrive_training"])
def test_action_tables_are_the_nearest_float32_of_the_exact_levels(preset):
    p = TagParams() if preset is None else TagParams.warpdrive_training()
    for table, low, high, levels in (
        (p.acceleration_table, p.min_acceleration, p.max_acceleration, p.num_acceleration_levels),
        (p.turn_table, p.min_turn, p.max_turn, p.num_turn_levels),
    ):
        assert table.dtype == np.float32 and table[0] == 0.0
        assert table[1:].tolist() == exact_levels(low, high, levels)
        assert np.array_equal(table[1:], -table[1:][::-1])  # a turn and its mirror cancel


def test_action_tables_differ_from_warpdrives_where_documented():
    default, training = TagParams(), TagParams.warpdrive_training()
    # (table, WarpDrive's, the indices docs/tag_rules.md lists)
    cases = [
        (default.acceleration_table, warpdrive_table(-1.0, 1.0, 10), []),
        (default.turn_table, warpdrive_table(-math.pi / 2, math.pi / 2, 10), [5, 6]),
        (training.acceleration_table, warpdrive_table(-0.1, 0.1, 20), [3, 18]),
        (training.turn_table, warpdrive_table(-2.356, 2.356, 20), [6, 9, 12, 15]),
    ]
    for ours, theirs, indices in cases:
        assert np.nonzero(ours != theirs)[0].tolist() == indices
        for i in indices:  # one float32 step apart
            assert np.nextafter(theirs[i], ours[i]) == ours[i]
    assert default.turn_table[6] == F32(0.1745329201221466)  # π/18 rounded once
    assert warpdrive_table(-math.pi / 2, math.pi / 2, 10)[6] == F32(0.1745329350233078)
    # end points that are float32 values already give WarpDrive's tables (as documented)
    half_pi = float(F32(math.pi / 2))
    same = TagParams(min_turn=-half_pi, max_turn=half_pi)
    assert np.array_equal(same.turn_table, warpdrive_table(-math.pi / 2, math.pi / 2, 10))


def test_a_left_turn_and_its_mirror_return_exactly_to_direction_zero():
    """With tables that are not symmetric (WarpDrive's under NumPy 2 are not) the way back
    ends a hair below zero, which the mod 2π turns into a direction just below 2π."""
    p = TagParams(num_taggers=1, num_runners=1)
    state = game(x=[2.0, 8.0], y=[2.0, 8.0])
    for index in np.nonzero(p.turn_table > 0)[0].tolist():
        mirror = p.num_turn_levels + 1 - index
        there = step(p, state, torch.tensor([[[0, index], [0, 0]]])).state
        back = step(p, there, torch.tensor([[[0, mirror], [0, 0]]])).state
        assert back["direction"][0, 0] == 0.0  # not 2π - ε: no wrap in the observation
