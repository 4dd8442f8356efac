"""The Gymnasium view of Tag: slots, info, terminated-once, the three autoreset modes.

The scenario (``scenario(mode)``): 2 games of 1 tagger + 2 runners, episode length 3,
everyone standing still (no-op actions). In game 0 runner 0 (slot 1) starts next to the
tagger and is tagged on step 1; everyone else is far apart. By hand:

- step 1: slot 1 terminated (reward -1), slot 0 (the tagger) reward +1;
- step 2: nothing happens; slot 1 is idle (zero obs, reward 0, not active);
- step 3: time is up: slots 0, 2, 3, 4, 5 truncated (slot 1 is not: it is done already),
  runners still in the game (slots 2, 4, 5) get the end-of-game reward +1;
- step 4: NEXT_STEP resets both games (reward 0, no done); DISABLED keeps them frozen.
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.envs.tag import observe
from tests.tag.makers import make_tag

T, F = True, False
NOOP = torch.zeros((6, 2), dtype=torch.int64)


def scenario(mode, **kwargs):
    env = make_tag(2, device="cpu", autoreset_mode=mode, num_taggers=1, num_runners=2,
                   episode_length=3, tagging_distance=0.05, **kwargs)
    env.reset(seed=0)
    obs = env.set_state({
        "x": torch.tensor([[5.0, 5.2, 9.0], [1.0, 5.0, 9.0]]),
        "y": torch.tensor([[5.0, 5.0, 9.0], [1.0, 5.0, 1.0]]),
        "speed": torch.zeros(2, 3), "acceleration": torch.zeros(2, 3),
        "in_game": torch.ones(2, 3, dtype=torch.int32), "t": torch.zeros(2, dtype=torch.int32),
    })
    return env, obs


def flags(t):
    return t.tolist()


def test_slots_info_and_spaces():
    env, obs = scenario(AutoresetMode.NEXT_STEP)
    assert env.num_envs == 6 and env.num_games == 2 and env.num_agents == 3
    assert env.possible_agents == ["tagger_0", "runner_0", "runner_1"]
    assert obs.shape == (6, env.single_observation_space.shape[0]) == (6, 16)
    assert env.observation_space.shape == (6, 16)
    assert env.action_space.shape == (6, 2)
    expected = observe(env.params, env.get_state()).reshape(6, -1)
    torch.testing.assert_close(obs, expected, rtol=0, atol=0)  # slot = game * A + agent
    _, info = env.reset(seed=1)
    assert flags(info["role"]) == [0, 1, 1, 0, 1, 1]
    assert flags(info["game"]) == [0, 0, 0, 1, 1, 1]
    assert flags(info["agent"]) == [0, 1, 2, 0, 1, 2]
    assert flags(info["active"]) == [T] * 6
    assert obs[0, -1] == 1.0 and obs[1, -1] == 0.0  # own role: tagger 1, runner 0


def test_next_step_terminated_once_then_idle_then_reset():
    env, _ = scenario(AutoresetMode.NEXT_STEP)
    obs, rew, term, trunc, info = env.step(NOOP)
    assert flags(term) == [F, T, F, F, F, F] and flags(trunc) == [F] * 6
    assert flags(rew) == [1, -1, 0, 0, 0, 0]
    assert obs[1].abs().sum() > 0  # the terminal observation (roles, in-game flags)
    assert flags(info["active"]) == [T, F, T, T, T, T]
    obs, rew, term, trunc, info = env.step(NOOP)
    assert torch.all(obs[1] == 0) and rew[1] == 0 and not term[1] and not trunc[1]
    obs, rew, term, trunc, info = env.step(NOOP)
    assert flags(term) == [F] * 6 and flags(trunc) == [T, F, T, T, T, T]
    assert flags(rew) == [0, 0, 1, 0, 1, 1]
    assert torch.all(obs[1] == 0) and obs[0].abs().sum() > 0
    assert flags(info["active"]) == [F] * 6
    obs, rew, term, trunc, info = env.step(torch.full((6, 2), 3))  # ignored: reset step
    assert flags(rew) == [0] * 6 and not (term | trunc).any()
    assert flags(env.get_state()["t"]) == [0, 0] and flags(info["active"]) == [T] * 6
    assert env.get_state()["speed"].eq(0).all()
    assert (obs[:, -2] == 0).all()  # time feature of a fresh game


def test_same_step_final_obs_per_slot():
    env, _ = scenario(AutoresetMode.SAME_STEP)
    obs, rew, term, trunc, info = env.step(NOOP)
    assert flags(info["_final_obs"]) == [F, T, F, F, F, F]
    final = info["final_obs"]
    assert final[1].abs().sum() > 0 and torch.all(obs[1] == 0)
    torch.testing.assert_close(final[[0, 2, 3, 4, 5]], obs[[0, 2, 3, 4, 5]])
    env.step(NOOP)
    last_state = env.get_state()
    obs, rew, term, trunc, info = env.step(NOOP)
    assert flags(trunc) == [T, F, T, T, T, T] and flags(rew) == [0, 0, 1, 0, 1, 1]
    assert flags(info["_final_obs"]) == [T, F, T, T, T, T]
    assert (info["final_obs"][[0, 2, 3, 4, 5], -2] == 1.0).all()  # t / episode_length = 1
    assert (obs[:, -2] == 0).all() and flags(info["active"]) == [T] * 6  # new games
    assert flags(env.get_state()["rng_counter"]) == (last_state["rng_counter"] + 1).tolist()


def test_disabled_freezes_ended_games_until_reset():
    env, _ = scenario(AutoresetMode.DISABLED)
    _, _, term, _, _ = env.step(NOOP)
    before = env.get_state()
    obs, _ = env.reset(options={"reset_mask": term.numpy()})  # only the idle runner: no reset
    assert flags(env.get_state()["rng_counter"]) == flags(before["rng_counter"])
    assert torch.all(obs[1] == 0)
    env.step(NOOP)
    _, _, term, trunc, _ = env.step(NOOP)
    _, rew, term2, trunc2, info = env.step(NOOP)
    assert flags(rew) == [0] * 6 and not (term2 | trunc2).any()
    assert flags(env.get_state()["t"]) == [3, 3] and flags(info["active"]) == [F] * 6
    obs, info = env.reset(options={"reset_mask": (term | trunc)})
    assert flags(env.get_state()["t"]) == [0, 0] and flags(info["active"]) == [T] * 6
    obs, _ = env.reset(options={"reset_mask": np.array([F, T])})  # a game mask
    assert flags(env.get_state()["rng_counter"]) == [2, 3]


def test_copy_false_reuses_outputs_and_state_round_trip():
    env = make_tag(3, device="cpu", copy=False, num_runners=3)
    env.reset(seed=4)
    env.action_space.seed(4)
    actions = [env.action_space.sample() for _ in range(6)]
    first = env.step(actions[0])
    second = env.step(actions[1])
    assert first[0] is second[0] and first[1] is second[1]
    saved = env.get_state()
    runs = []
    for _ in range(2):
        env.set_state(saved)
        runs.append([tuple(t.clone() for t in env.step(a)[:4]) for a in actions[2:]])
    for a, b in zip(*runs, strict=True):
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y)


def test_presets_and_episode_length_alias_through_make_vec():
    import gymnasium

    env = gymnasium.make_vec("GPUTag-v0", num_games=2, device="cpu", preset="warpdrive_training")
    assert env.num_envs == 2 * 110 and env.single_observation_space.shape == (72,)
    assert env.single_action_space.nvec.tolist() == [21, 21]
    env = gymnasium.make_vec("GPUTagGrid-v0", num_games=3, device="cpu", max_episode_steps=7)
    assert env.params.episode_length == 7 and env.num_envs == 33
    grid = gymnasium.make_vec("GPUTagGrid-v0", num_envs=1, device="cpu", max_episode_steps=2)
    grid.reset(seed=0)
    grid.step(np.zeros(11, dtype=np.int64))
    assert grid.step(np.zeros(11, dtype=np.int64))[3].all()
