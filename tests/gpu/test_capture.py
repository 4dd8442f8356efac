"""``capture_rollout`` on a GPU: once captured, a call replays what the eager loop computes,
bit for bit: every stored output, the env's state after it, and the policy's own random
numbers (torch's generator ends where the eager draws leave it). Also: invalid actions
inside a replay are reported after it, the env carries on eagerly between calls, and what
cannot be captured is refused clearly.

Each comparison runs :data:`CALLS` calls (the eager warm-up, the capturing call, then
replays) against ``CALLS * STEPS`` steps of a plain ``env.step()`` loop on an equal env
seeded alike, with torch's CUDA generator reset to the same seed before each.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest
import torch
from gymnasium.vector import AutoresetMode

import gpu_vecenv
from gpu_vecenv import captured_rollout
from gpu_vecenv.actions import InvalidActionError
from gpu_vecenv.captured_rollout import WARMUP_CALLS
from gpu_vecenv.deferred_errors import ERROR_FLAG_INTERVAL
from gpu_vecenv.entry_points import make_vec
from tests.runtime.test_captured_rollout import _assert_trajectory_equals, _eager_reference
from tests.tag.makers import make_tag, make_tag_grid

from .classic import CLASSIC_IDS, MODES

pytestmark = pytest.mark.gpu

STEPS = 6
CALLS = WARMUP_CALLS + 3  # eager warm-up, the capture (and its replay), two more replays
POLICY_SEED = 21
"""The seed of the policy's generators, set before the roll-out and before the loop."""


def random_policy(env, generator=None):
    """Uniform actions from torch's default CUDA generator (or ``generator``); Box actions
    reach 1.5 times the bounds (the env clips)."""
    space, n, device = env.single_action_space, env.num_envs, env.device
    if isinstance(space, gym.spaces.Discrete):
        return lambda obs: torch.randint(0, int(space.n), (n,), device=device,
                                         generator=generator)
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = torch.as_tensor(space.nvec, device=device)
        return lambda obs: (torch.rand((n, *space.shape), device=device, generator=generator)
                            * nvec).long()
    high = float(space.high.max())
    return lambda obs: (torch.rand((n, *space.shape), device=device, generator=generator)
                        * 3 - 1.5) * high


def mlp_policy(env):
    """A small MLP that samples: Gumbel-max over logits (Discrete) or a Gaussian around its
    output (Box), from torch's default CUDA generator."""
    space = env.single_action_space
    discrete = isinstance(space, gym.spaces.Discrete)
    outputs = int(space.n) if discrete else int(space.shape[0])
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(env.obs_dim, 32), torch.nn.Tanh(),
                              torch.nn.Linear(32, outputs)).to(env.device)

    def act(obs):
        out = net(obs)
        if discrete:
            return torch.argmax(out - torch.log(-torch.log(torch.rand_like(out))), dim=-1)
        return out + 0.5 * torch.randn_like(out)

    return act


def assert_rollout_equals_eager_loop(make_env, make_policy, seed=3, generators=(),
                                     actions_deferred=True):
    """The comparison described in the module docstring, then: both envs step eagerly
    (3 steps), and one more (replayed) call equals the loop again from the observation
    the eager steps returned. The policy draws from torch's default CUDA generator and
    ``generators``; ``actions_deferred``: whether the graph should copy the actions in
    groups (the policy returns a fresh tensor every step) or step by step. Returns the
    trajectories."""
    env, reference = make_env(), make_env()
    policy = make_policy(env)
    rollout = gpu_vecenv.capture_rollout(env, policy, STEPS, generators=generators)
    obs, _ = env.reset(seed=seed)
    reference_obs, _ = reference.reset(seed=seed)

    start = seeded_random_states(generators)
    trajectories = []
    for _ in range(CALLS):
        trajectories.append(rollout(obs).clone())
        obs = rollout.trajectory.next_obs
    assert rollout.captured
    assert rollout.actions_deferred == actions_deferred
    end = random_states(generators)

    set_random_states(generators, start)
    with torch.no_grad():
        for traj in trajectories:
            rows, reference_obs = _eager_reference(reference, policy, reference_obs, STEPS)
            _assert_trajectory_equals(traj, rows, reference_obs)
    # the replays advanced the generators exactly as the eager draws did
    for replayed, eager in zip(end, random_states(generators), strict=True):
        assert torch.equal(replayed, eager)
    assert_same_state(env, reference)

    with torch.no_grad():
        for _ in range(3):  # the env carries on eagerly ...
            action = policy(obs).clone()  # (a view of obs would change in the step)
            obs, reward, *_ = env.step(action)
            reference_obs, reference_reward, *_ = reference.step(action)
            assert torch.equal(obs, reference_obs) and torch.equal(reward, reference_reward)
        start = random_states(generators)
        traj = rollout(obs)  # ... and a replay continues from what it returned
        set_random_states(generators, start)
        rows, reference_obs = _eager_reference(reference, policy, reference_obs, STEPS)
    _assert_trajectory_equals(traj, rows, reference_obs)
    assert_same_state(env, reference)
    rollout.check_errors()
    return trajectories


def random_states(generators) -> list[torch.Tensor]:
    """The states of ``generators`` and of torch's default CUDA generator."""
    return [g.get_state() for g in generators] + [torch.cuda.get_rng_state()]


def set_random_states(generators, states: list[torch.Tensor]) -> None:
    for generator, state in zip(generators, states, strict=False):
        generator.set_state(state)
    torch.cuda.set_rng_state(states[-1])


def seeded_random_states(generators) -> list[torch.Tensor]:
    for generator in generators:
        generator.manual_seed(POLICY_SEED)
    torch.cuda.manual_seed(POLICY_SEED)
    return random_states(generators)


def assert_same_state(env, reference):
    state = env.get_state()
    for key, value in reference.get_state().items():
        assert torch.equal(state[key], value), key


def classic_env(env_id, n, mode, backend):
    return lambda: make_vec(env_id, n, device="cuda", backend=backend, autoreset_mode=mode,
                            max_episode_steps=4, copy=False)


@pytest.mark.parametrize("n", [1, 3001])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_random_policy_on_the_kernels(env_id, mode, n):
    trajectories = assert_rollout_equals_eager_loop(classic_env(env_id, n, mode, "cuda"),
                                                    random_policy)
    assert any(bool(t.truncated.any()) for t in trajectories)  # autoresets in the graph


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("env_id", ["GPUCartPole-v1", "GPUPendulum-v1", "GPUAcrobot-v1"])
def test_random_policy_on_the_torch_backend(env_id, mode):
    assert_rollout_equals_eager_loop(classic_env(env_id, 3001, mode, "torch"), random_policy)


@pytest.mark.parametrize("n", [1, 3001])
@pytest.mark.parametrize("backend", ["cuda", "torch"])
@pytest.mark.parametrize("env_id", ["GPUCartPole-v1", "GPUAcrobot-v1", "GPUPendulum-v1",
                                    "GPUMountainCarContinuous-v0"])
def test_mlp_policy(env_id, backend, n):
    assert_rollout_equals_eager_loop(
        classic_env(env_id, n, AutoresetMode.SAME_STEP, backend), mlp_policy)


def test_a_generator_of_the_policys_own():
    generator = torch.Generator(device="cuda")
    assert_rollout_equals_eager_loop(
        classic_env("GPUCartPole-v1", 1000, AutoresetMode.NEXT_STEP, "cuda"),
        lambda env: random_policy(env, generator), generators=[generator])


@pytest.mark.parametrize("games", [1, 64])
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP],
                         ids=lambda m: m.name)
@pytest.mark.parametrize("backend", ["cuda", "torch"])
def test_tag_slots(backend, mode, games):
    def make():
        return make_tag(games, device="cuda", backend=backend, copy=False,
                        autoreset_mode=mode, num_taggers=3, num_runners=40,
                        grid_length=8.0, episode_length=6)

    trajectories = assert_rollout_equals_eager_loop(make, random_policy)
    assert trajectories[0].active.shape == (STEPS, games * 43)
    assert any(bool(t.truncated.any()) for t in trajectories)  # games timed out in the graph


@pytest.mark.parametrize("backend", ["cuda", "torch"])
def test_tag_grid_slots(backend):
    def make():
        return make_tag_grid(50, device="cuda", backend=backend, copy=False,
                             autoreset_mode=AutoresetMode.SAME_STEP, episode_length=5)

    trajectories = assert_rollout_equals_eager_loop(make, random_policy)
    assert any(bool(t.truncated.any() or t.terminated.any()) for t in trajectories)


def test_a_policy_that_returns_one_buffer_every_step():
    # Deferred copies would all read the last step's action: detected at capture, and the
    # graph copies the action after every step instead.
    def make_policy(env):
        buffer = torch.empty(env.num_envs, dtype=torch.int64, device=env.device)
        return lambda obs: buffer.random_(0, 2)

    assert_rollout_equals_eager_loop(
        classic_env("GPUCartPole-v1", 100, AutoresetMode.NEXT_STEP, "cuda"), make_policy,
        actions_deferred=False)


def test_a_policy_whose_action_is_a_view_of_the_observation():
    # Pendulum's action (N, 1) as a view of obs[t]: storage of the trajectory itself.
    assert_rollout_equals_eager_loop(
        classic_env("GPUPendulum-v1", 100, AutoresetMode.SAME_STEP, "cuda"),
        lambda env: (lambda obs: obs[:, 2:3]), actions_deferred=False)


@pytest.mark.parametrize("steps_per_group", [1, 4])
def test_actions_copied_in_groups(monkeypatch, steps_per_group):
    # STEPS = 6 steps: groups of 4 (4 + 2) and of 1 (a copy per step).
    n = 1000
    monkeypatch.setattr(captured_rollout, "DEFERRED_ACTION_BYTES", steps_per_group * n * 8)
    assert_rollout_equals_eager_loop(
        classic_env("GPUCartPole-v1", n, AutoresetMode.NEXT_STEP, "cuda"), random_policy)


def test_eager_calls_run_on_the_callers_stream():
    # The warm-up calls run where the caller's own work runs (a side stream here), in order
    # with it; only the capture happens on a stream of its own.
    seen = []
    caller = torch.cuda.Stream()
    caller.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(caller):
        env = make_vec("GPUCartPole-v1", 64, device="cuda", backend="cuda", copy=False)

        def policy(obs):
            if not torch.cuda.is_current_stream_capturing():
                seen.append(torch.cuda.current_stream())
            return torch.randint(0, 2, (64,), device="cuda")

        rollout = gpu_vecenv.capture_rollout(env, policy, 4)
        obs, _ = env.reset(seed=0)
        for _ in range(WARMUP_CALLS + 2):
            obs = rollout(obs).next_obs
        rollout.check_errors()
    caller.synchronize()
    assert rollout.captured
    assert len(seen) == WARMUP_CALLS * 4 and all(stream == caller for stream in seen)


def test_invalid_actions_in_a_replay_are_reported_after_it():
    n, steps = 1000, ERROR_FLAG_INTERVAL  # a count copy after every call
    env = make_vec("GPUCartPole-v1", n, device="cuda", backend="cuda", copy=False)
    poisoned = torch.zeros(n, dtype=torch.bool, device="cuda")

    def policy(obs):  # action 5 (out of range for Discrete(2)) where poisoned
        return torch.where(poisoned, 5, torch.randint(0, 2, (n,), device="cuda"))

    rollout = gpu_vecenv.capture_rollout(env, policy, steps)
    obs, _ = env.reset(seed=0)
    for _ in range(WARMUP_CALLS + 1):
        obs = rollout(obs).next_obs
    assert rollout.captured
    rollout.check_errors()  # nothing invalid yet

    poisoned[17] = True
    traj = rollout(obs)
    # env 17 was left unchanged on every step; the others moved
    assert torch.equal(traj.obs[:, 17], traj.obs[:1, 17].expand(steps, 4))
    assert torch.equal(traj.next_obs[17], traj.obs[0, 17])
    assert not traj.rewards[:, 17].any()
    assert traj.rewards[:, torch.arange(n, device="cuda") != 17].sum() > 0
    with pytest.raises(InvalidActionError, match=f"{steps} invalid action"):
        rollout.check_errors()
    poisoned[17] = False
    obs = rollout(traj.next_obs).next_obs
    rollout.check_errors()  # reported once, then cleared

    poisoned[3] = True
    obs = rollout(obs).next_obs
    poisoned[3] = False
    torch.cuda.synchronize()  # the count's copy has reached the host: the next call raises
    with pytest.raises(InvalidActionError, match="in captured roll-out steps"):
        rollout(obs)
    obs = rollout(obs).next_obs  # and the roll-out goes on
    env.step(torch.zeros(n, dtype=torch.int64, device="cuda"))
    env.check_errors()


def test_storage_rows_are_aligned_as_fresh_allocations():
    env = make_vec("GPUPendulum-v1", 1, device="cuda", backend="cuda")
    rollout = gpu_vecenv.capture_rollout(env, random_policy(env), 5)
    assert all(row.data_ptr() % 256 == 0 for row in rollout.trajectory.observation_rows())


def test_settings_that_cannot_be_captured_are_refused_on_cuda():
    def policy(obs):
        return (obs[:, 0] > 0).long()

    with pytest.raises(ValueError, match="strict=True"):
        gpu_vecenv.capture_rollout(make_vec("GPUCartPole-v1", 4, device="cuda", strict=True),
                                   policy, 3)
    graphed = make_vec("GPUCartPole-v1", 4, device="cuda", backend="torch", torch_graphs=True)
    with pytest.raises(ValueError, match="torch_graphs=True"):
        gpu_vecenv.capture_rollout(graphed, policy, 3)
    env = make_vec("GPUCartPole-v1", 4, device="cuda")
    obs, _ = env.reset(seed=0)
    with pytest.raises(TypeError, match="tensor on cuda:0 .* got a tensor on cpu"):
        gpu_vecenv.capture_rollout(env, lambda obs: torch.zeros(4, dtype=torch.int64), 3)(obs)


_HOST_SYNC_SCRIPT = textwrap.dedent("""
    import torch, gpu_vecenv
    env = gpu_vecenv.make_vec("GPUCartPole-v1", 4, device="cuda", backend="cuda")
    def policy(obs):
        action = torch.randint(0, 2, (4,), device="cuda")
        if action.sum().item() > 100:  # a host read: legal eagerly, not in a graph
            raise AssertionError
        return action
    rollout = gpu_vecenv.capture_rollout(env, policy, 3)
    obs, _ = env.reset(seed=0)
    for _ in range(rollout.warmup_calls):
        obs = rollout(obs).next_obs
    print("warm-up ran eagerly")
    try:
        rollout(obs)
    except RuntimeError as exc:
        print("refused:", str(exc).splitlines()[0])
""")


def test_a_policy_that_reads_the_host_is_refused_when_captured():
    # In a subprocess: a failed capture can leave the CUDA context unusable.
    result = subprocess.run([sys.executable, "-c", _HOST_SYNC_SCRIPT], capture_output=True,
                            text=True, timeout=300)
    assert "warm-up ran eagerly" in result.stdout, result.stderr[-2000:]
    assert "refused: capturing the roll-out into a CUDA graph failed" in result.stdout, (
        result.stdout + result.stderr[-2000:])
    assert ".item()" in result.stdout
