"""Bad input gets a clear error and changes nothing."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from gpu_vecenv import make_vec
from gpu_vecenv.actions import InvalidActionError
from gpu_vecenv.env_ids import UnknownEnvError
from gpu_vecenv.vector_env import GpuVectorEnv
from tests.runtime.counting_env import BOX_COUNTING, COUNTING


def fresh(definition=COUNTING, n=3, **kw):
    env = GpuVectorEnv(definition, n, device="cpu", **kw)
    env.reset(seed=0)
    env.step(np.zeros(n, dtype=np.int64) if definition is COUNTING
             else np.zeros((n, 2), dtype=np.float32))
    return env


def assert_state_equal(before, after):
    assert before.keys() == after.keys()
    for k in before:
        assert torch.equal(before[k], after[k]), k


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        (np.zeros(4, dtype=np.int64), "shape"),
        (np.zeros((3, 1), dtype=np.int64), "shape"),
        (np.zeros(3, dtype=np.float32), "dtype"),
        (np.zeros(3, dtype=bool), "dtype"),
        (torch.zeros(3, dtype=torch.float64), "dtype"),
        (np.array([0, 1, 2]), "not in range"),
        (np.array([0, -1, 1]), "not in range"),
        (np.array(["a", "b", "c"]), "dtype"),
    ],
)
def test_bad_discrete_actions(actions, match):
    env = fresh()
    before = env.get_state()
    with pytest.raises(InvalidActionError, match=match):
        env.step(actions)
    assert_state_equal(before, env.get_state())
    env.step(np.array([1, 1, 1]))  # still usable afterwards


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        (np.zeros((3,), dtype=np.float32), "shape"),
        (np.zeros((3, 2), dtype=np.int64), "dtype"),
        (np.array([[0, 0], [np.nan, 0], [0, 0]], dtype=np.float32), "finite"),
        (np.array([[0, np.inf], [0, 0], [0, -np.inf]], dtype=np.float32), "finite"),
    ],
)
def test_bad_box_actions(actions, match):
    env = fresh(BOX_COUNTING)
    before = env.get_state()
    with pytest.raises(InvalidActionError, match=match):
        env.step(actions)
    assert_state_equal(before, env.get_state())


def test_box_actions_outside_bounds_are_clipped_by_the_env():
    env = fresh(BOX_COUNTING, n=2)
    obs = env.step(np.array([[5.0, 5.0], [-5.0, 0.0]], dtype=np.float64))[0]
    assert obs.flatten().tolist() == [1.0 + 3.0, 1.0 + 0.0]


def test_deferred_mode_freezes_only_the_bad_envs_and_reports():
    env = fresh(strict=False)
    before = env.get_state()
    with pytest.raises(InvalidActionError, match="left unchanged"):
        env.step(np.array([1, 7, 1]))
    after = env.get_state()
    assert after["count"][1] == before["count"][1]
    assert after["elapsed_steps"][1] == before["elapsed_steps"][1]
    assert after["count"][0] == before["count"][0] + 2
    env.step(np.array([0, 0, 0]))  # the error was reported once, then cleared


def test_check_errors_is_quiet_without_errors():
    fresh(strict=False).check_errors()


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="num_envs"):
        GpuVectorEnv(COUNTING, 0, device="cpu")
    with pytest.raises(TypeError, match="num_envs"):
        GpuVectorEnv(COUNTING, 2.5, device="cpu")
    with pytest.raises(TypeError, match="unknown parameter.*gravity.*terminate_at"):
        GpuVectorEnv(COUNTING, 2, device="cpu", gravity=1.0)
    with pytest.raises(ValueError, match="autoreset_mode"):
        GpuVectorEnv(COUNTING, 2, device="cpu", autoreset_mode="sometimes")
    with pytest.raises(ValueError, match="max_episode_steps"):
        GpuVectorEnv(COUNTING, 2, device="cpu", max_episode_steps=0)
    with pytest.raises(ValueError, match="backend"):
        GpuVectorEnv(COUNTING, 2, device="cpu", backend="numba")
    with pytest.raises(RuntimeError, match="backend='cuda' cannot run"):
        GpuVectorEnv(COUNTING, 2, device="cpu", backend="cuda")
    with pytest.raises(ValueError, match="render_mode"):
        GpuVectorEnv(COUNTING, 2, device="cpu", render_mode="human")


def test_unknown_ids_and_kwargs():
    with pytest.raises(UnknownEnvError, match="GPUCartPole-v1"):
        make_vec("GPUCartPol-v1", 4)
    with pytest.raises(TypeError, match="unknown parameter"):
        make_vec("GPUCartPole-v1", 4, device="cpu", masscar=2.0)
    with pytest.raises(gym.error.Error):
        gym.make_vec("GPUCartPole-v9", num_envs=2)
    with pytest.raises(TypeError, match="unknown parameter"):
        gym.make_vec("GPUCartPole-v1", num_envs=2, device="cpu", not_a_param=1)


@pytest.mark.parametrize(
    ("mask", "error", "match"),
    [
        (np.array([True, False]), ValueError, "shape"),
        (np.array([1, 0, 1]), TypeError, "dtype"),
        (torch.tensor([1, 0, 1]), TypeError, "dtype"),
        (torch.zeros(4, dtype=torch.bool), ValueError, "shape"),
        ([True, False, True], TypeError, "numpy array or a torch tensor"),
        (np.zeros(3, dtype=bool), ValueError, "at least one True"),
    ],
)
def test_bad_reset_masks(mask, error, match):
    env = fresh()
    before = env.get_state()
    with pytest.raises(error, match=match):
        env.reset(options={"reset_mask": mask})
    assert_state_equal(before, env.get_state())


def test_unknown_reset_option():
    env = fresh()
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"low": -0.1})


def test_step_before_reset_and_after_close():
    env = GpuVectorEnv(COUNTING, 2, device="cpu")
    with pytest.raises(gym.error.ResetNeeded):
        env.step(np.zeros(2, dtype=np.int64))
    env.reset(seed=0)
    env.close()
    with pytest.raises(gym.error.ClosedEnvironmentError):
        env.step(np.zeros(2, dtype=np.int64))


def test_set_state_validates_everything_first():
    env = fresh()
    before = env.get_state()
    with pytest.raises(KeyError, match="unknown state key"):
        env.set_state({"count": torch.ones(3), "velocity": torch.ones(3)})
    with pytest.raises(ValueError, match="shape"):
        env.set_state({"count": torch.ones(3), "elapsed_steps": torch.ones(2, dtype=torch.int32)})
    with pytest.raises(TypeError, match="int32"):
        env.set_state({"elapsed_steps": torch.ones(3)})
    assert_state_equal(before, env.get_state())


def test_accepted_action_forms():
    env = fresh()
    for actions in ([0, 1, 0], np.array([0, 1, 0], dtype=np.int32), torch.tensor([1, 0, 1]),
                    torch.tensor([1, 0, 1], dtype=torch.uint8)):
        obs = env.step(actions)[0]
        assert obs.shape == (3, 1)
