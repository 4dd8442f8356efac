"""RecordEpisodeStatistics: hand-written episodes, Gymnasium's own wrapper on the same
numbers, Tag's idle slots, the ring buffer and the summary."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics as GymRecordEpisodeStatistics

import gpu_vecenv
from gpu_vecenv.vector_env import GpuVectorEnv
from gpu_vecenv.wrappers import RecordEpisodeStatistics
from tests.runtime.counting_env import COUNTING
from tests.wrappers.scripted_env import ScriptedVectorEnv, random_script

# COUNTING, max 3 steps: env 0 always plays 1 (counts 2, 4: terminated after 2 steps,
# return 6), env 1 always plays 0 (counts 1, 2, 3: truncated after 3 steps, return 6).
ACTIONS = torch.tensor([1, 0])
EXPECTED_ENDS = {
    # step -> {env: (return, length)}; NEXT_STEP spends one step per reset
    AutoresetMode.NEXT_STEP: {2: {0: (6, 2)}, 3: {1: (6, 3)}, 5: {0: (6, 2)}, 7: {1: (6, 3)}},
    AutoresetMode.SAME_STEP: {
        2: {0: (6, 2)},
        3: {1: (6, 3)},
        4: {0: (6, 2)},
        6: {0: (6, 2), 1: (6, 3)},
        7: {},
    },
}


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_counting_env_episodes_by_hand(mode):
    envs = RecordEpisodeStatistics(GpuVectorEnv(COUNTING, 2, device="cpu", autoreset_mode=mode))
    start = time.perf_counter()
    envs.reset(seed=0)
    for step in range(1, 8):
        *_, info = envs.step(ACTIONS)
        ends = EXPECTED_ENDS[mode].get(step, {})
        assert info["_episode"].tolist() == [i in ends for i in range(2)], step
        for i in range(2):
            r, l = ends.get(i, (0, 0))
            assert info["episode"]["r"][i].item() == r and info["episode"]["l"][i].item() == l
        assert info["episode"]["r"].dtype == torch.float64
        assert info["episode"]["l"].dtype == torch.int64
        elapsed = time.perf_counter() - start
        assert ((info["episode"]["t"] > 0) == info["_episode"]).all()
        assert (info["episode"]["t"] <= elapsed).all()
    expected_lengths = [
        l
        for s in sorted(EXPECTED_ENDS[mode])
        for _, (_, l) in sorted(EXPECTED_ENDS[mode][s].items())
    ]
    assert envs.length_queue.tolist() == expected_lengths
    assert envs.return_queue.tolist() == [6.0] * len(expected_lengths)
    assert envs.episode_count == len(expected_lengths)


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_same_numbers_as_gymnasiums_wrapper(mode):
    script = random_script(steps=60, num_envs=5, seed=1)
    ours = RecordEpisodeStatistics(ScriptedVectorEnv(script, mode, device="cpu"), buffer_length=7)
    theirs = GymRecordEpisodeStatistics(ScriptedVectorEnv(script, mode), buffer_length=7)
    ours.reset(seed=0)
    theirs.reset(seed=0)
    for _ in range(60):
        *_, term, trunc, info = ours.step(torch.zeros(5, dtype=torch.int64))
        *_, gym_info = theirs.step(np.zeros(5, dtype=np.int64))
        done = (term | trunc).numpy()
        assert info["_episode"].numpy().tolist() == done.tolist()
        if done.any():
            np.testing.assert_array_equal(info["episode"]["r"].numpy(), gym_info["episode"]["r"])
            np.testing.assert_array_equal(info["episode"]["l"].numpy(), gym_info["episode"]["l"])
        if mode == AutoresetMode.DISABLED and done.any():
            ours.reset(options={"reset_mask": torch.as_tensor(done)})
            theirs.reset(options={"reset_mask": done.copy()})
    assert ours.episode_count == theirs.episode_count > 7
    np.testing.assert_array_equal(ours.return_queue.numpy(), np.array(theirs.return_queue))
    np.testing.assert_array_equal(ours.length_queue.numpy(), np.array(theirs.length_queue))


def test_ring_buffer_keeps_the_latest_in_env_order():
    envs = RecordEpisodeStatistics(
        GpuVectorEnv(COUNTING, 5, device="cpu", autoreset_mode="SAME_STEP"), buffer_length=3
    )
    envs.reset(seed=0)
    assert envs.return_queue.tolist() == [] and envs.episode_count == 0
    for _ in range(2):  # every env: counts 2, 4 -> terminated, return 6, length 2
        envs.step(torch.ones(5, dtype=torch.int64))
    assert envs.return_queue.tolist() == [6.0] * 3 and envs.episode_count == 5
    # envs 0, 1: counts 1, 2, 4 (return 7); envs 2-4: 1, 2, 3 (return 6); all after 3
    # steps. Five episodes in one step: the last three in env order are kept.
    for action in ([0] * 5, [0] * 5, [1, 1, 0, 0, 0]):
        envs.step(torch.tensor(action))
    assert envs.return_queue.tolist() == [6.0] * 3 and envs.length_queue.tolist() == [3] * 3
    # env 0 alone: counts 2, 4 -> return 6, length 2, appended after envs 3 and 4
    for _ in range(2):
        envs.step(torch.tensor([1, 0, 0, 0, 0]))
    assert envs.length_queue.tolist() == [3, 3, 2] and envs.episode_count == 11


def test_episode_summary_covers_episodes_since_the_last_call():
    envs = RecordEpisodeStatistics(GpuVectorEnv(COUNTING, 2, device="cpu"))
    envs.reset(seed=0)
    assert math.isnan(envs.episode_summary()["mean_return"])
    for _ in range(3):
        envs.step(ACTIONS)
    summary = envs.episode_summary()
    assert summary == {"episodes": 2, "mean_return": 6.0, "mean_length": 2.5}
    assert envs.episode_summary(clear=False)["episodes"] == 0
    for _ in range(4):
        envs.step(ACTIONS)
    assert envs.episode_summary() == {"episodes": 2, "mean_return": 6.0, "mean_length": 2.5}


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_tag_idle_slots_add_no_length(mode):
    # A slot's episode runs from its game's reset to its own done; steps spent idle (a
    # tagged runner waiting for its game to end) must not count toward the next one.
    env = gpu_vecenv.make_vec(
        "GPUTag-v0", 3, device="cpu", autoreset_mode=mode, episode_length=25, tagging_distance=0.3
    )
    envs = RecordEpisodeStatistics(env)
    envs.reset(seed=1)
    agents = env.num_agents
    game_clock = np.zeros(3, dtype=int)  # steps since each game's reset
    pending = np.zeros(3, dtype=bool)
    tagged_early = 0
    for _ in range(80):
        actions = torch.as_tensor(
            np.stack([env.single_action_space.sample() for _ in range(env.num_envs)])
        )
        _, _, term, trunc, info = envs.step(actions)
        if mode == AutoresetMode.NEXT_STEP:
            game_clock = np.where(pending, 0, game_clock + 1)
        else:
            game_clock += 1
        done = (term | trunc).numpy()
        for slot in np.flatnonzero(done):
            assert info["episode"]["l"][slot].item() == game_clock[slot // agents], slot
        game_over = done.reshape(3, agents)[:, 0]  # agent 0, a tagger, ends with its game
        tagged_early += int((done.reshape(3, agents) & ~game_over[:, None]).sum())
        if mode == AutoresetMode.SAME_STEP:
            game_clock[game_over] = 0
        pending = game_over
    assert tagged_early > 0 and envs.episode_count > tagged_early


def test_disabled_mode_partial_reset_restarts_only_the_masked_envs():
    envs = RecordEpisodeStatistics(
        GpuVectorEnv(COUNTING, 2, device="cpu", autoreset_mode="DISABLED", max_episode_steps=None)
    )
    envs.reset(seed=0)
    envs.step(torch.tensor([0, 0]))  # counts 1, 1
    envs.reset(options={"reset_mask": np.array([True, False])})
    *_, info = envs.step(torch.tensor([1, 1]))  # env 0: 2; env 1: 1 + 2 = 3
    *_, info = envs.step(torch.tensor([1, 1]))  # env 0: 4, ends; env 1: 5, ends
    assert info["episode"]["r"].tolist() == [6.0, 9.0]
    assert info["episode"]["l"].tolist() == [2, 3]


def test_bad_arguments_and_clashing_keys():
    env = GpuVectorEnv(COUNTING, 2, device="cpu")
    with pytest.raises(ValueError, match="buffer_length"):
        RecordEpisodeStatistics(env, buffer_length=0)
    envs = RecordEpisodeStatistics(RecordEpisodeStatistics(env))
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="already has the key 'episode'"):
        envs.step(ACTIONS)
    with pytest.raises(TypeError, match="reset_mask"):
        RecordEpisodeStatistics(env).reset(options={"reset_mask": [True, False]})
