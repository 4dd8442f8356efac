"""The three autoreset modes, pinned by hand-written sequences on the counting env.

Two envs: env 0 always plays 0 (counts 1, 2, 3 -> truncated at the 3-step limit), env 1
always plays 1 (counts 2, 4 -> terminated). Obs, reward, terminated, truncated and
final_obs below are worked out by hand from that rule.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.vector_env import GpuVectorEnv
from tests.runtime.counting_env import COUNTING

ACTIONS = np.array([0, 1])
T, F = True, False


def make(mode):
    env = GpuVectorEnv(COUNTING, 2, device="cpu", autoreset_mode=mode)
    obs, info = env.reset(seed=0)
    assert obs.tolist() == [[0.0], [0.0]] and info == {}
    return env


def check(step_result, obs, reward, terminated, truncated):
    o, r, te, tr, _ = step_result
    assert o.flatten().tolist() == obs
    assert r.tolist() == reward
    assert te.tolist() == terminated
    assert tr.tolist() == truncated


def test_next_step():
    env = make(AutoresetMode.NEXT_STEP)
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    expected = [
        ([1, 2], [1, 2], [F, F], [F, F]),
        ([2, 4], [2, 4], [F, T], [F, F]),
        ([3, 0], [3, 0], [F, F], [T, F]),  # env 1 resets: obs 0, reward 0, no flags
        ([0, 2], [0, 2], [F, F], [F, F]),  # env 0 resets
        ([1, 4], [1, 4], [F, T], [F, F]),
    ]
    for obs, reward, terminated, truncated in expected:
        result = env.step(ACTIONS)
        check(result, obs, reward, terminated, truncated)
        assert result[4] == {}


def test_same_step():
    env = make(AutoresetMode.SAME_STEP)
    expected = [  # obs, reward, terminated, truncated, final_obs, final mask
        ([1, 2], [1, 2], [F, F], [F, F], [1, 2], [F, F]),
        ([2, 0], [2, 4], [F, T], [F, F], [2, 4], [F, T]),
        ([0, 2], [3, 2], [F, F], [T, F], [3, 2], [T, F]),
        ([1, 0], [1, 4], [F, T], [F, F], [1, 4], [F, T]),
        ([2, 2], [2, 2], [F, F], [F, F], [2, 2], [F, F]),
    ]
    for obs, reward, terminated, truncated, final_obs, mask in expected:
        result = env.step(ACTIONS)
        check(result, obs, reward, terminated, truncated)
        info = result[4]
        assert info["final_obs"].flatten().tolist() == final_obs
        assert info["_final_obs"].tolist() == mask
        assert info["_final_info"].tolist() == mask
        assert info["final_info"] == {}


def test_disabled_with_reset_mask():
    env = make(AutoresetMode.DISABLED)
    check(env.step(ACTIONS), [1, 2], [1, 2], [F, F], [F, F])
    check(env.step(ACTIONS), [2, 4], [2, 4], [F, T], [F, F])
    obs, info = env.reset(options={"reset_mask": np.array([False, True])})
    assert obs.flatten().tolist() == [2, 0] and info == {}
    check(env.step(ACTIONS), [3, 2], [3, 2], [F, F], [T, F])
    obs, _ = env.reset(options={"reset_mask": torch.tensor([True, False])})
    assert obs.flatten().tolist() == [0, 2]
    check(env.step(ACTIONS), [1, 4], [1, 4], [F, T], [F, F])


def test_disabled_steps_ended_envs_on():
    """Without a reset the dynamics continue (Gymnasium leaves this undefined)."""
    env = make(AutoresetMode.DISABLED)
    env.step(ACTIONS)
    env.step(ACTIONS)
    check(env.step(ACTIONS), [3, 6], [3, 6], [F, T], [T, T])


def test_reset_counter_and_elapsed_steps():
    env = make(AutoresetMode.NEXT_STEP)
    assert env.get_state()["rng_counter"].tolist() == [1, 1]
    for _ in range(4):
        env.step(ACTIONS)
    state = env.get_state()
    assert state["rng_counter"].tolist() == [2, 2]  # each env reset once more
    assert state["elapsed_steps"].tolist() == [0, 1]
    assert state["autoreset_pending"].tolist() == [F, F]


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_mode_by_name(mode):
    env = GpuVectorEnv(COUNTING, 2, device="cpu", autoreset_mode=mode.name.lower())
    assert env.autoreset_mode == mode
    env = GpuVectorEnv(COUNTING, 2, device="cpu", autoreset_mode=mode.value)
    assert env.metadata["autoreset_mode"] == mode


def test_time_limit_none_never_truncates():
    env = GpuVectorEnv(COUNTING, 1, device="cpu", max_episode_steps=None, terminate_at=1e9)
    env.reset(seed=0)
    for _ in range(50):
        _, _, terminated, truncated, _ = env.step(np.array([0]))
        assert not terminated.any() and not truncated.any()
    assert env.get_state()["elapsed_steps"].item() == 50


def test_outputs_fresh_or_reused():
    env = GpuVectorEnv(COUNTING, 2, device="cpu")
    first, _ = env.reset(seed=0)
    second = env.step(ACTIONS)[0]
    assert first.tolist() == [[0], [0]], "copy=True: earlier outputs are never overwritten"
    assert second.data_ptr() != first.data_ptr()
    env = GpuVectorEnv(COUNTING, 2, device="cpu", copy=False)
    env.reset(seed=0)
    a = env.step(ACTIONS)[0]
    b = env.step(ACTIONS)[0]
    assert a.data_ptr() == b.data_ptr()
