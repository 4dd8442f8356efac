"""Continuous Tag's torch reference against scenarios worked out by hand (docs/tag_rules.md).

Every scenario builds one or two games' state directly, steps the pure ``step`` once with
chosen actions, and checks the numbers the rules give. Action tables used below (with
``LEVELS``): acceleration index 1 = -1, 2 = 0, 3 = +1; turn index 1 = -π/2, 2 = 0, 3 = +π/2;
index 0 is the no-op.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gpu_vecenv.envs.tag import TagParams, observe, step

LEVELS = dict(num_acceleration_levels=3, num_turn_levels=3, min_acceleration=-1.0,
              max_acceleration=1.0, min_turn=-math.pi / 2, max_turn=math.pi / 2)
ACC_UP, ACC_DOWN, ACC_ZERO, TURN_LEFT, TURN_RIGHT = 3, 1, 2, 3, 1
F32 = np.float32


def game(x, y, speed=None, direction=None, acceleration=None, in_game=None, t=0):
    """One game (G = 1) from per-agent lists."""
    n = len(x)

    def row(values, default, dtype=torch.float32):
        return torch.tensor([default] * n if values is None else values, dtype=dtype)[None]

    return {"x": row(x, 0.0), "y": row(y, 0.0), "speed": row(speed, 0.0),
            "direction": row(direction, 0.0), "acceleration": row(acceleration, 0.0),
            "in_game": row(in_game, 1, torch.int32), "t": torch.tensor([t], dtype=torch.int32)}


def act(*pairs):
    return torch.tensor([list(p) for p in pairs], dtype=torch.int64)[None]


def test_action_tables_decode_index_zero_as_noop():
    p = TagParams(**LEVELS)
    assert p.acceleration_table.tolist() == [0.0, -1.0, 0.0, 1.0]
    assert p.turn_table.tolist() == pytest.approx([0.0, -math.pi / 2, 0.0, math.pi / 2])
    assert p.acceleration_table.dtype == np.float32


def test_edge_hit_clips_position_and_costs_the_penalty():
    p = TagParams(num_taggers=1, num_runners=1, edge_hit_penalty=-0.5,
                  step_penalty_for_tagger=-0.1, step_reward_for_runner=0.25, **LEVELS)
    # Tagger: speed 0.9 + acc 1 -> clipped to 1 (acc reset), moves from 9.5 to 10.5 -> 10.
    # Runner: heading down (3π/2) at speed 0.5 from y = 0.2 -> -0.3 -> 0.
    s = game(x=[9.5, 2.0], y=[5.0, 0.2], speed=[0.9, 0.5], direction=[0.0, 3 * math.pi / 2])
    r = step(p, s, act((ACC_UP, 0), (0, 0)))
    assert r.state["x"][0, 0].item() == 10.0 and r.state["y"][0, 0].item() == 5.0
    assert r.state["y"][0, 1].item() == 0.0
    assert r.state["x"][0, 1].item() == pytest.approx(2.0, abs=1e-6)
    assert r.state["speed"][0].tolist() == [1.0, 0.5]
    assert r.state["acceleration"][0].tolist() == [0.0, 0.0]
    assert r.reward[0].tolist() == [float(F32(-0.5) + F32(-0.1)), float(F32(-0.5) + F32(0.25))]


def test_no_edge_hit_inside_the_field_and_on_its_border():
    p = TagParams(num_taggers=1, num_runners=1, edge_hit_penalty=-0.5, **LEVELS)
    s = game(x=[9.0, 5.0], y=[5.0, 5.0], speed=[1.0, 0.0])  # tagger lands exactly on x = 10
    r = step(p, s, act((0, 0), (0, 0)))
    assert r.state["x"][0, 0].item() == 10.0
    assert r.reward[0].tolist() == [0.0, 0.0]


def test_acceleration_accumulates_and_resets_at_the_speed_bounds():
    p = TagParams(num_taggers=1, num_runners=3, skill_level_runner=0.5, **LEVELS)
    # tagger: 0.2 + (0.1 + 0) = 0.3, strictly inside (0, 1): acc kept (accumulates)
    # runner 0: 0.3 + (0 - 1) < 0 -> speed 0, acc reset
    # runner 1: 0.25 + (0 + 1) > vmax = 0.5 -> speed 0.5, acc reset
    # runner 2: 0.5 + (-0.25 + 0) = 0.25 inside -> acc -0.25 kept
    s = game(x=[1.0, 3.0, 5.0, 7.0], y=[1.0, 3.0, 5.0, 7.0], speed=[0.2, 0.3, 0.25, 0.5],
             acceleration=[0.1, 0.0, 0.0, -0.25])
    r = step(p, s, act((ACC_ZERO, 0), (ACC_DOWN, 0), (ACC_UP, 0), (0, 0)))
    assert r.state["speed"][0].tolist() == pytest.approx([0.3, 0.0, 0.5, 0.25])
    assert r.state["acceleration"][0].tolist() == pytest.approx([0.1, 0.0, 0.0, -0.25])


def test_direction_turns_modulo_two_pi_and_moves_along_it():
    p = TagParams(num_taggers=1, num_runners=1, **LEVELS)
    s = game(x=[5.0, 5.0], y=[5.0, 2.0], speed=[0.5, 0.5], direction=[0.0, math.pi])
    r = step(p, s, act((0, TURN_RIGHT), (0, TURN_LEFT)))
    d = r.state["direction"][0].tolist()
    assert d == pytest.approx([3 * math.pi / 2, 3 * math.pi / 2], abs=1e-6)
    assert all(0.0 <= v < 2 * math.pi for v in d)
    assert r.state["y"][0].tolist() == pytest.approx([4.5, 1.5], abs=1e-6)
    assert r.state["x"][0].tolist() == pytest.approx([5.0, 5.0], abs=1e-6)


def test_out_of_game_agent_is_frozen_and_unrewarded():
    p = TagParams(num_taggers=1, num_runners=2, edge_hit_penalty=-1.0,
                  step_reward_for_runner=0.5, **LEVELS)
    s = game(x=[5.0, 0.0, 8.0], y=[5.0, 0.0, 8.0], speed=[0.0, 0.7, 0.0],
             direction=[0.0, math.pi, 1.0], acceleration=[0.0, 0.2, 0.0], in_game=[1, 0, 1])
    r = step(p, s, act((0, 0), (ACC_UP, TURN_LEFT), (0, 0)))
    assert r.state["x"][0, 1].item() == 0.0 and r.state["y"][0, 1].item() == 0.0
    assert r.state["speed"][0, 1].item() == 0.0
    assert r.state["direction"][0, 1].item() == 0.0
    assert r.state["acceleration"][0, 1].item() == 0.0
    assert r.reward[0].tolist() == [0.0, 0.0, 0.5]
    assert r.left[0].tolist() == [False, False, False]


TAG = dict(LEVELS, grid_length=10.0, tagging_distance=0.1)  # tagged when nearer than 1.0


def test_one_tagger_tags_two_runners_in_one_step():
    p = TagParams(num_taggers=2, num_runners=3, tag_reward_for_tagger=3.0,
                  tag_penalty_for_runner=-2.0, **TAG)
    s = game(x=[5.0, 1.0, 5.5, 5.0, 8.0], y=[5.0, 1.0, 5.0, 5.6, 8.0])
    r = step(p, s, act(*[(0, 0)] * 5))
    assert r.reward[0].tolist() == [6.0, 0.0, -2.0, -2.0, 0.0]
    assert r.state["in_game"][0].tolist() == [1, 1, 0, 0, 1]
    assert r.left[0].tolist() == [False, False, True, True, False]
    assert not r.terminated[0] and not r.truncated[0]


def test_only_the_nearest_tagger_scores_and_ties_go_to_the_lowest_index():
    p = TagParams(num_taggers=3, num_runners=2, **TAG)
    # runner 0 at (5, 5): tagger 0 at distance 0.9, tagger 1 at 0.8 -> tagger 1 scores.
    # runner 1 at (2, 2): tagger 2 at (2, 2.5), 0.5 away -> tagger 2 scores.
    s = game(x=[5.9, 5.0, 2.0, 5.0, 2.0], y=[5.0, 5.8, 2.5, 5.0, 2.0])
    r = step(p, s, act(*[(0, 0)] * 5))
    assert r.reward[0].tolist() == [0.0, 1.0, 1.0, -1.0, -1.0]
    # runner 0 at (5, 5), taggers 0 and 1 both 0.5 away -> tagger 0 scores.
    tie = game(x=[4.5, 5.5, 0.0, 5.0, 9.0], y=[5.0, 5.0, 0.0, 5.0, 9.0])
    r = step(p, tie, act(*[(0, 0)] * 5))
    assert r.reward[0].tolist() == [1.0, 0.0, 0.0, -1.0, 0.0]


def test_distance_must_be_strictly_below_the_tagging_distance():
    p = TagParams(num_taggers=1, num_runners=2, **TAG)
    s = game(x=[5.0, 6.0, 5.0], y=[5.0, 5.0, 5.999])  # exactly 1.0 away: not tagged
    r = step(p, s, act(*[(0, 0)] * 3))
    assert r.state["in_game"][0].tolist() == [1, 1, 0]


def test_tags_use_positions_after_the_move():
    p = TagParams(num_taggers=1, num_runners=1, **TAG)
    s = game(x=[5.0, 7.5], y=[5.0, 5.0], speed=[1.0, 0.0])  # tagger moves to 6.0
    r = step(p, s, act((0, 0), (0, 0)))
    assert r.state["in_game"][0].tolist() == [1, 1]  # 1.5 away
    s = game(x=[5.0, 6.7], y=[5.0, 5.0], speed=[1.0, 0.0])
    r = step(p, s, act((0, 0), (0, 0)))
    assert r.state["in_game"][0].tolist() == [1, 0]  # 0.7 away


def test_runner_tagged_on_the_last_step_gets_no_end_of_game_reward():
    p = TagParams(num_taggers=1, num_runners=2, episode_length=3,
                  end_of_game_reward_for_runner=1.5, **TAG)
    s = game(x=[5.0, 5.5, 9.0], y=[5.0, 5.0, 9.0], t=2)
    r = step(p, s, act(*[(0, 0)] * 3))
    assert r.reward[0].tolist() == [1.0, -1.0, 1.5]
    assert r.truncated.tolist() == [True] and r.terminated.tolist() == [False]
    assert r.state["t"].tolist() == [3]


def test_no_end_of_game_reward_before_the_last_step():
    p = TagParams(num_taggers=1, num_runners=1, episode_length=5, **TAG)
    r = step(p, game(x=[1.0, 9.0], y=[1.0, 9.0], t=3), act((0, 0), (0, 0)))
    assert r.reward[0].tolist() == [0.0, 0.0] and not r.truncated[0]


def test_all_runners_tagged_terminates_the_game():
    p = TagParams(num_taggers=1, num_runners=2, **TAG)
    s = {k: torch.cat([v, v]) for k, v in game(x=[5.0, 5.5, 4.6], y=[5.0, 5.0, 5.0]).items()}
    s["x"][1, 2] = 9.0  # second game: one runner escapes
    r = step(p, s, act(*[(0, 0)] * 3).expand(2, 3, 2))
    assert r.terminated.tolist() == [True, False]
    assert r.reward[0].tolist() == [2.0, -1.0, -1.0]


def test_runner_can_stay_in_the_game_after_being_tagged():
    p = TagParams(num_taggers=1, num_runners=1, episode_length=2,
                  runner_exits_game_after_tagged=False, **TAG)
    r = step(p, game(x=[5.0, 5.5], y=[5.0, 5.0], t=1), act((0, 0), (0, 0)))
    assert r.state["in_game"][0].tolist() == [1, 1]
    assert r.reward[0].tolist() == [1.0, -1.0 + 1.0]  # tagged, then the end-of-game reward
    assert not r.terminated[0] and r.truncated[0]


# -- observations --

OBS = dict(LEVELS, grid_length=10.0, episode_length=4, max_speed=2.0)


def test_full_observation_layout_by_hand():
    p = TagParams(num_taggers=1, num_runners=2, **OBS)
    s = game(x=[1.0, 3.0, 6.0], y=[2.0, 2.0, 9.0], speed=[0.5, 1.0, 0.0],
             acceleration=[0.0, -0.5, 0.25], direction=[0.0, math.pi, math.pi / 2],
             in_game=[1, 1, 0], t=1)
    obs = observe(p, s)[0].numpy()
    assert obs.shape == (3, 7 * 2 + 2)
    pos = F32(math.sqrt(2)) * F32(10.0)
    spd = F32(2.0 + 1e-10)
    tau = F32(2 * math.pi)

    def d(v, i, j, scale):
        return F32(F32(v[j]) / scale) - F32(F32(v[i]) / scale)

    x, y = [1.0, 3.0, 6.0], [2.0, 2.0, 9.0]
    sp, ac, di = [0.5, 1.0, 0.0], [0.0, -0.5, 0.25], [0.0, math.pi, math.pi / 2]
    # agent 1 (a runner) sees agents 0 and 2 in id order
    expected = [d(x, 1, 0, pos), d(x, 1, 2, pos), d(y, 1, 0, pos), d(y, 1, 2, pos),
                d(sp, 1, 0, spd), d(sp, 1, 2, spd), d(ac, 1, 0, spd), d(ac, 1, 2, spd),
                d(di, 1, 0, tau), d(di, 1, 2, tau), 1.0, 0.0, 1.0, 0.0, 0.25, 0.0]
    np.testing.assert_array_equal(obs[1], np.array(expected, dtype=F32))
    # agent 2 is out of the game: zero Δs and time, but roles, in-game flags, own role
    np.testing.assert_array_equal(obs[2], np.array([0.0] * 10 + [1, 0, 1, 1, 0.0, 0.0],
                                                   dtype=F32))
    assert obs[0][-1] == 1.0  # the tagger's own role


def test_own_role_feature_can_be_turned_off():
    p = TagParams(num_taggers=1, num_runners=2, observe_own_role=False, **OBS)
    assert observe(p, game(x=[1, 2, 3], y=[1, 2, 3]))[0].shape == (3, 15)
    q = TagParams(num_taggers=1, num_runners=2, use_full_observation=False,
                  num_other_agents_observed=2, observe_own_role=False, **OBS)
    assert observe(q, game(x=[1, 2, 3], y=[1, 2, 3]))[0].shape == (3, 15)


def test_own_state_feature_by_hand():
    """``observe_own_state``: x/L, y/L, cos, sin of the direction and speed/max_speed of
    the observing agent, after the time and before the own role; zeros out of the game.
    The Δ features alone cannot say which way an agent faces or where the edges are."""
    p = TagParams(num_taggers=1, num_runners=2, observe_own_state=True, **OBS)
    assert p.obs_dim == 7 * 2 + 1 + 5 + 1
    s = game(x=[1.0, 3.0, 6.0], y=[2.0, 5.0, 9.0], speed=[0.5, 1.0, 0.0],
             direction=[0.0, math.pi / 2, math.pi], in_game=[1, 1, 0], t=1)
    obs = observe(p, s)[0]
    own = torch.tensor([[1.0 / 10, 2.0 / 10, 1.0, 0.0, 0.5 / F32(2.0 + 1e-10)],
                        [3.0 / 10, 5.0 / 10, math.cos(F32(math.pi / 2)),
                         math.sin(F32(math.pi / 2)), 1.0 / F32(2.0 + 1e-10)],
                        [0.0] * 5])
    torch.testing.assert_close(obs[:, 15:20], own)
    assert obs[0, 14] == 0.25 and obs[0, 20] == 1.0 and obs[1, 20] == 0.0  # time, roles
    plain = observe(TagParams(num_taggers=1, num_runners=2, **OBS), s)[0]
    torch.testing.assert_close(obs[:, :15], plain[:, :15], rtol=0, atol=0)


def test_egocentric_positions_by_hand():
    """``egocentric``: Δx, Δy of the others in the observer's frame (x ahead, y to its
    left); the other features are unchanged."""
    p = TagParams(num_taggers=1, num_runners=2, egocentric=True, **OBS)
    # Agent 0 faces north (π/2): agent 1 straight ahead, agent 2 to its right.
    s = game(x=[5.0, 5.0, 7.0], y=[5.0, 8.0, 5.0], direction=[math.pi / 2, 0.0, 0.0])
    obs = observe(p, s)[0]
    pos = F32(math.sqrt(2)) * F32(10.0)
    torch.testing.assert_close(obs[0, 0:4], torch.tensor([3.0, 0.0, 0.0, -2.0]) / pos,
                               atol=1e-6, rtol=0)
    # Agent 1 faces east (0): its frame is the field's.
    plain = observe(TagParams(num_taggers=1, num_runners=2, **OBS), s)[0]
    torch.testing.assert_close(obs[1], plain[1], rtol=0, atol=0)
    torch.testing.assert_close(obs[:, 4:], plain[:, 4:], rtol=0, atol=0)


def test_partial_observation_orders_by_distance_skips_the_out_and_pads():
    p = TagParams(num_taggers=1, num_runners=4, use_full_observation=False,
                  num_other_agents_observed=3, **OBS)
    # From agent 0 at (0, 0): agent 1 at 3, agent 2 at 1 (out of the game), agent 3 at 2,
    # agent 4 at 2 (tie with 3: lower id first). Seen: 3, 4, 1.
    s = game(x=[0.0, 3.0, 1.0, 2.0, 0.0], y=[0.0, 0.0, 0.0, 0.0, 2.0],
             in_game=[1, 1, 0, 1, 1], t=2)
    obs = observe(p, s)[0].numpy()
    pos = F32(math.sqrt(2)) * F32(10.0)
    xs = [F32(F32(v) / pos) for v in (2.0, 0.0, 3.0)]
    ys = [F32(F32(v) / pos) for v in (0.0, 2.0, 0.0)]
    np.testing.assert_array_equal(obs[0, 0:3], xs)
    np.testing.assert_array_equal(obs[0, 3:6], ys)
    np.testing.assert_array_equal(obs[0, 15:18], [0, 0, 0])  # roles: all runners
    np.testing.assert_array_equal(obs[0, 18:21], [1, 1, 1])  # in-game flags
    assert obs[0, 21] == 0.5 and obs[0, 22] == 1.0  # time, own role
    # Now only two others remain in the game for agent 1: the third entry is padding.
    s["in_game"][0] = torch.tensor([1, 1, 0, 0, 1], dtype=torch.int32)
    obs = observe(p, s)[0].numpy()
    np.testing.assert_array_equal(obs[1, 15:18], [1, 0, 0])  # tagger (agent 0), runner 4, pad
    np.testing.assert_array_equal(obs[1, 18:21], [1, 1, 0])
    assert all(obs[1, k * 3 + 2] == 0.0 for k in range(7))
    # An agent out of the game observes all zeros in partial mode.
    np.testing.assert_array_equal(obs[2], np.zeros(23, dtype=F32))


def test_observations_stay_in_the_space_over_a_rollout():
    from tests.tag.makers import make_tag

    for full in (True, False):
        env = make_tag(8, device="cpu", num_runners=6, tagging_distance=0.05,
                       skill_level_runner=1.5, use_full_observation=full,
                       observe_own_state=not full)
        obs, _ = env.reset(seed=5)
        env.action_space.seed(5)
        for _ in range(60):
            obs, *_ = env.step(env.action_space.sample())
            assert env.observation_space.contains(obs.numpy())


def test_presets_and_validation():
    p = TagParams.warpdrive_training()
    assert (p.num_taggers, p.num_runners, p.grid_length, p.episode_length) == (10, 100, 20, 500)
    assert not p.use_full_observation and p.num_other_agents_observed == 10
    assert p.obs_dim == 7 * 10 + 2
    assert TagParams.warpdrive_training(num_runners=5).num_runners == 5
    assert TagParams().obs_dim == 7 * 10 + 2
    with pytest.raises(ValueError, match="edge_hit_penalty"):
        TagParams(edge_hit_penalty=0.5)
    with pytest.raises(ValueError, match="num_other_agents_observed"):
        TagParams(num_runners=2, use_full_observation=False, num_other_agents_observed=3)
