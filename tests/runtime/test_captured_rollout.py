"""``capture_rollout`` off the GPU: the eager loop it runs there, its storage, its checks.

On a CPU every call runs the eager loop (the GPU tests, tests/gpu/test_capture.py, hold
the captured graph to the same loop). Pinned here: what the trajectory holds, by hand on
the counting env and against a plain ``env.step()`` loop, and every refusal.
"""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import gpu_vecenv
from gpu_vecenv import captured_rollout, make_vec
from gpu_vecenv.actions import InvalidActionError
from gpu_vecenv.captured_rollout import CapturedRollout, capture_problems
from gpu_vecenv.trajectory import OBS_ROW_ALIGNMENT, Trajectory
from gpu_vecenv.vector_env import GpuVectorEnv
from tests.runtime.counting_env import COUNTING
from tests.tag.makers import make_tag, make_tag_grid


def _plays_0_and_1(obs):
    return torch.tensor([0, 1])


def _counting_rollout(mode):
    env = GpuVectorEnv(COUNTING, 2, device="cpu", autoreset_mode=mode, max_episode_steps=3)
    rollout = gpu_vecenv.capture_rollout(env, _plays_0_and_1, num_steps=4)
    obs, _ = env.reset(seed=0)
    return rollout(obs)


def _column(values):
    return torch.tensor(values, dtype=torch.float32)


def test_next_step_trajectory_by_hand():
    # env 0 plays 0 (+1 a step, truncated after 3 steps), env 1 plays 1 (+2, terminated
    # at 4); NEXT_STEP resets an env on the step after its episode ended (reward 0).
    traj = _counting_rollout(AutoresetMode.NEXT_STEP)
    assert torch.equal(traj.obs[..., 0], _column([[0, 0], [1, 2], [2, 4], [3, 0]]))
    assert torch.equal(traj.actions, torch.tensor([[0, 1]] * 4))
    assert torch.equal(traj.rewards, _column([[1, 2], [2, 4], [3, 0], [0, 2]]))
    assert traj.terminated.tolist() == [[False, False], [False, True], [False, False],
                                        [False, False]]
    assert traj.truncated.tolist() == [[False, False], [False, False], [True, False],
                                       [False, False]]
    assert torch.equal(traj.next_obs[:, 0], _column([0, 2]))
    assert traj.final_obs is None and traj.active is None


def test_same_step_trajectory_by_hand():
    traj = _counting_rollout(AutoresetMode.SAME_STEP)
    assert torch.equal(traj.obs[..., 0], _column([[0, 0], [1, 2], [2, 0], [0, 2]]))
    assert torch.equal(traj.rewards, _column([[1, 2], [2, 4], [3, 2], [1, 4]]))
    assert traj.terminated.tolist() == [[False, False], [False, True], [False, False],
                                        [False, True]]
    assert traj.truncated.tolist() == [[False, False], [False, False], [True, False],
                                       [False, False]]
    # the last observation of an ended episode, the current one elsewhere
    assert torch.equal(traj.final_obs[..., 0], _column([[1, 2], [2, 4], [3, 2], [1, 4]]))
    assert torch.equal(traj.next_obs[:, 0], _column([1, 0]))


def _random_policy(env):
    space, n = env.single_action_space, env.num_envs
    if isinstance(space, gym.spaces.Discrete):
        return lambda obs: torch.randint(0, int(space.n), (n,))
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = torch.as_tensor(space.nvec)
        return lambda obs: (torch.rand((n, *space.shape)) * nvec).long()
    # obs-dependent, and reaching past the bounds (the env clips)
    return lambda obs: (torch.rand((n, *space.shape)) * 3 - 1.5) + 0 * obs[:, :1]


def _eager_reference(env, policy, obs, steps):
    """The plain loop a user writes: (obs, action, reward, terminated, truncated,
    final_obs, active) per step, cloned, and the last obs."""
    rows = []
    for _ in range(steps):
        seen = obs.clone()  # with copy=False the step overwrites obs
        action = policy(obs)
        given = action.clone()  # (and an action that is a view of obs)
        next_obs, reward, terminated, truncated, info = env.step(action)
        rows.append([seen, given, reward.clone(), terminated.clone(),
                     truncated.clone(), info.get("final_obs"), info.get("active")])
        rows[-1][5:] = [None if x is None else x.clone() for x in rows[-1][5:]]
        obs = next_obs
    return rows, obs


def _assert_trajectory_equals(traj: Trajectory, rows, next_obs):
    for t, (obs, action, reward, terminated, truncated, final_obs, active) in enumerate(rows):
        assert torch.equal(traj.obs[t], obs), t
        assert torch.equal(traj.actions[t], action), t
        assert torch.equal(traj.rewards[t], reward), t
        assert torch.equal(traj.terminated[t], terminated), t
        assert torch.equal(traj.truncated[t], truncated), t
        if final_obs is not None:
            assert torch.equal(traj.final_obs[t], final_obs), t
        if active is not None:
            assert torch.equal(traj.active[t], active), t
    assert torch.equal(traj.next_obs, next_obs)


def _compare_with_eager_loop(make, steps=6, calls=3, seed=5):
    """``calls`` roll-out calls against ``calls * steps`` steps of a plain loop on an equal
    env, both drawing from torch's default generator seeded alike; then both envs go on
    eagerly. Returns the trajectories."""
    env, reference = make(), make()
    policy = _random_policy(env)
    rollout = gpu_vecenv.capture_rollout(env, policy, num_steps=steps)
    obs, _ = env.reset(seed=seed)
    reference_obs, _ = reference.reset(seed=seed)
    torch.manual_seed(11)
    trajectories = []
    for _ in range(calls):
        trajectories.append(rollout(obs).clone())
        obs = rollout.trajectory.next_obs
    torch.manual_seed(11)
    for traj in trajectories:
        rows, reference_obs = _eager_reference(reference, policy, reference_obs, steps)
        _assert_trajectory_equals(traj, rows, reference_obs)
    # the env carries on eagerly from where the roll-out left it
    for _ in range(3):
        action = policy(obs)
        obs, reward, *_ = env.step(action)
        reference_obs, reference_reward, *_ = reference.step(action)
        assert torch.equal(obs, reference_obs) and torch.equal(reward, reference_reward)
    for key, value in reference.get_state().items():
        assert torch.equal(env.get_state()[key], value), key
    return trajectories


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("env_id", ["GPUCartPole-v1", "GPUPendulum-v1", "GPUMountainCar-v0"])
def test_equals_the_eager_loop(env_id, mode):
    trajectories = _compare_with_eager_loop(
        lambda: make_vec(env_id, 7, device="cpu", autoreset_mode=mode, max_episode_steps=4))
    assert any(bool(t.truncated.any()) for t in trajectories)  # autoresets were exercised


def test_equals_the_eager_loop_for_tag_slots():
    def make():
        return make_tag(3, device="cpu", copy=False, num_runners=3, tagging_distance=0.2,
                        episode_length=5, autoreset_mode=AutoresetMode.SAME_STEP)

    trajectories = _compare_with_eager_loop(make)
    assert trajectories[0].active.shape == (6, 12)
    assert any(bool(t.truncated.any() or t.terminated.any()) for t in trajectories)


def test_a_start_obs_from_eager_steps_continues_the_env():
    env, reference = (make_vec("GPUCartPole-v1", 4, device="cpu") for _ in range(2))
    rollout = gpu_vecenv.capture_rollout(env, lambda obs: (obs[:, 2] > 0).long(), 5)
    obs, _ = env.reset(seed=1)
    reference_obs, _ = reference.reset(seed=1)
    rollout(obs)
    rows, reference_obs = _eager_reference(reference, rollout.policy, reference_obs, 5)
    for _ in range(2):  # stepped by hand between calls: pass what the env last returned
        obs, *_ = env.step(torch.ones(4, dtype=torch.int64))
        reference_obs, *_ = reference.step(torch.ones(4, dtype=torch.int64))
    traj = rollout(obs)
    rows, reference_obs = _eager_reference(reference, rollout.policy, reference_obs, 5)
    _assert_trajectory_equals(traj, rows, reference_obs)


def test_storage_layout():
    env = make_vec("GPUPendulum-v1", 5, device="cpu", autoreset_mode="same_step")
    rollout = gpu_vecenv.capture_rollout(env, lambda obs: torch.zeros(5, 1), num_steps=3)
    traj = rollout.trajectory
    assert (traj.obs.shape, traj.obs.dtype) == ((3, 5, 3), torch.float32)
    assert (traj.actions.shape, traj.actions.dtype) == ((3, 5, 1), torch.float32)
    assert traj.rewards.shape == traj.terminated.shape == traj.truncated.shape == (3, 5)
    assert traj.terminated.dtype == traj.truncated.dtype == torch.bool
    assert traj.final_obs.shape == (3, 5, 3) and traj.active is None
    assert (traj.num_steps, traj.num_envs) == (3, 5)
    rows = traj.observation_rows()
    assert len(rows) == 4 and rows[-1] is traj.next_obs
    for row in rows:  # each step's rows contiguous, aligned as a fresh allocation is
        assert row.is_contiguous()
        assert (row.data_ptr() - rows[0].data_ptr()) % (4 * OBS_ROW_ALIGNMENT) == 0
    copy = traj.clone()
    traj.rewards.fill_(1.0)
    assert not copy.rewards.any()
    discrete = gpu_vecenv.capture_rollout(make_vec("GPUCartPole-v1", 2, device="cpu"),
                                          _plays_0_and_1, num_steps=2).trajectory
    assert discrete.actions.dtype == torch.int64 and discrete.final_obs is None


def test_runs_eagerly_off_cuda_and_says_why():
    env = make_vec("GPUCartPole-v1", 2, device="cpu")
    rollout = gpu_vecenv.capture_rollout(env, _plays_0_and_1, 3)
    obs, _ = env.reset(seed=0)
    for _ in range(4):
        obs = rollout(obs).next_obs
    assert not rollout.captured
    assert rollout.eager_reason == "the env's device is cpu, not cuda"
    assert "eager" in repr(rollout)
    forced = gpu_vecenv.capture_rollout(env, _plays_0_and_1, 3, capture=False)
    assert forced.eager_reason == "capture=False"
    assert isinstance(forced, gpu_vecenv.CapturedRollout)


def test_bad_arguments_are_refused():
    env = make_vec("GPUCartPole-v1", 2, device="cpu")
    with pytest.raises(TypeError, match="needs a gpu_vecenv env .* got VectorWrapper"):
        CapturedRollout(gym.vector.VectorWrapper(env), _plays_0_and_1, 2)
    with pytest.raises(TypeError, match="policy must be callable"):
        CapturedRollout(env, "random", 2)
    for steps in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="num_steps must be an int >= 1"):
            CapturedRollout(env, _plays_0_and_1, steps)
    with pytest.raises(ValueError, match="warmup_calls must be an int >= 1"):
        CapturedRollout(env, _plays_0_and_1, 2, warmup_calls=0)
    with pytest.raises(TypeError, match="generators must be torch.Generator objects on cpu"):
        CapturedRollout(env, _plays_0_and_1, 2, generators=[np.random.default_rng()])


def test_bad_calls_are_refused():
    env = make_vec("GPUCartPole-v1", 2, device="cpu")
    rollout = CapturedRollout(env, _plays_0_and_1, 2)
    with pytest.raises(gym.error.ResetNeeded):
        rollout(torch.zeros(2, 4))
    obs, _ = env.reset(seed=0)
    for bad in (obs[:1], obs.numpy(), obs[:, :3]):
        with pytest.raises(ValueError, match=r"obs must be the env's observation, a tensor "
                                             r"of shape \(2, 4\) on cpu"):
            rollout(bad)
    host_policy = CapturedRollout(env, lambda obs: np.array([0, 1]), 2)
    with pytest.raises(TypeError, match="must return its action as a tensor on cpu .* got "
                                        "ndarray"):
        host_policy(obs)
    with pytest.raises(InvalidActionError, match="shape"):
        CapturedRollout(env, lambda obs: torch.zeros(3, dtype=torch.int64), 2)(obs)
    env.close()
    with pytest.raises(gym.error.ClosedEnvironmentError):
        rollout(obs)


@pytest.mark.parametrize("strict", [True, False])
def test_invalid_actions_are_reported(strict):
    env = make_vec("GPUCartPole-v1", 3, device="cpu", strict=strict)
    rollout = gpu_vecenv.capture_rollout(env, lambda obs: torch.tensor([0, 1, 2]), 4)
    obs, _ = env.reset(seed=0)
    with pytest.raises(InvalidActionError, match="not in range" if strict else "1 invalid"):
        rollout(obs)
    rollout.check_errors()  # reported once


def test_capture_problems_name_every_setting_a_graph_cannot_hold():
    assert capture_problems(make_vec("GPUCartPole-v1", 2, device="cpu", strict=False)) == []
    assert "strict=True" in capture_problems(make_vec("GPUCartPole-v1", 2, device="cpu"))[0]
    graphed = make_vec("GPUCartPole-v1", 2, device="cpu", strict=False, torch_graphs=True,
                       torch_compile=True)
    assert [p.split()[0] for p in capture_problems(graphed)] == ["torch_graphs=True",
                                                                 "torch_compile=True:"]
    human = SimpleNamespace(strict=False, backend_name="cuda", render_mode="human")
    assert "render_mode='human'" in capture_problems(human)[0]
    kernels = SimpleNamespace(strict=False, backend_name="cuda", render_mode=None,
                              torch_graphs=True, torch_compile=True)  # ignored by kernels
    assert capture_problems(kernels) == []
    # the Tag references keep their constants on the device (gpu_vecenv.device_constants)
    for make in (make_tag, make_tag_grid):
        assert capture_problems(make(1, device="cpu", backend="torch", strict=False)) == []


def _random_actions(obs):
    return torch.randint(0, 2, (obs.shape[0],))


@pytest.mark.parametrize("steps_per_group", [1, 3, 100])
def test_actions_copied_in_groups_equal_copies_per_step(monkeypatch, steps_per_group):
    # The captured graph copies the policy's actions into the storage a group of steps at
    # a time; the same loop run eagerly here (7 steps: groups of 3 leave a last one of 1).
    n, steps = 2, 7
    monkeypatch.setattr(captured_rollout, "DEFERRED_ACTION_BYTES", steps_per_group * n * 8)
    trajectories = []
    for defer_actions in (False, True):
        env = make_vec("GPUCartPole-v1", n, device="cpu", max_episode_steps=4)
        rollout = CapturedRollout(env, _random_actions, steps)
        obs, _ = env.reset(seed=0)
        rollout._start_from(obs)
        torch.manual_seed(3)
        storages = rollout._steps(captured=False, defer_actions=defer_actions)
        trajectories.append(rollout.trajectory.clone())
    assert len(storages) == steps and rollout._actions_are_fresh(storages)
    assert trajectories[1].actions.any()
    for name in ("obs", "actions", "rewards", "terminated", "truncated", "next_obs"):
        assert torch.equal(getattr(trajectories[0], name), getattr(trajectories[1], name))


def test_actions_that_deferred_copies_would_misread_are_detected():
    env = make_vec("GPUPendulum-v1", 2, device="cpu")
    obs, _ = env.reset(seed=0)
    buffer = torch.zeros(2, 1)
    for policy, fresh in ((lambda obs: buffer.uniform_(-2, 2), False),  # one buffer
                          (lambda obs: obs[:, 2:3], False),  # a view of the storage
                          (lambda obs: obs[:, 2:3] * 1, True)):  # new tensors
        rollout = CapturedRollout(env, policy, 5)
        rollout._start_from(obs)
        assert rollout._actions_are_fresh(rollout._steps(False, defer_actions=True)) == fresh
