"""``env.sample_actions()`` on a GPU: the kernel (``cuda_src/sample_actions.cu``) draws what
the torch definition draws, bit for bit, for every shipped env; in a CUDA graph every
replay draws new actions, the eager sequence; as the policy of ``capture_rollout`` the
replayed roll-out equals the eager loop."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import gpu_vecenv
from gpu_vecenv.action_sampling import ActionSampler
from gpu_vecenv.entry_points import make_vec
from gpu_vecenv.env_ids import shipped_ids
from tests.runtime.test_captured_rollout import _assert_trajectory_equals, _eager_reference

pytestmark = pytest.mark.gpu

SHIPPED = shipped_ids()


def _pair(env_id: str, n: int, **kwargs):
    common = dict(device="cuda", strict=False, **kwargs)
    return make_vec(env_id, n, backend="cuda", **common), make_vec(env_id, n, backend="torch",
                                                                   **common)


@pytest.mark.parametrize("env_id", SHIPPED)
@pytest.mark.parametrize("n", [1, 37, 1000])
def test_the_kernel_draws_the_definitions_actions(env_id, n):
    kernel_env, torch_env = _pair(env_id, n, autoreset_mode=AutoresetMode.DISABLED)
    units = kernel_env._seed_units()[0]
    seeds = [int(s) for s in np.random.default_rng(n).integers(0, 2**63, units)]
    for env in (kernel_env, torch_env):
        env.reset(seed=seeds)
    assert kernel_env.backend_name == "cuda" and torch_env.backend_name == "torch"
    for call in range(4):
        a, b = kernel_env.sample_actions(), torch_env.sample_actions()
        assert a.dtype == b.dtype and a.shape == b.shape and a.is_cuda
        assert torch.equal(a.view(torch.int32) if a.is_floating_point() else a,
                           b.view(torch.int32) if b.is_floating_point() else b), call
        kernel_env.step(a)
        torch_env.step(b)
    mask = torch.arange(units, device="cuda") % 2 == 0
    for env in (kernel_env, torch_env):
        env.reset(seed=[s + 1 for s in seeds], options={"reset_mask": mask})
    assert torch.equal(kernel_env._action_sampler.counters, torch_env._action_sampler.counters)
    assert torch.equal(kernel_env.sample_actions(), torch_env.sample_actions())
    kernel_env.check_errors()


def test_each_graph_replay_draws_the_next_actions():
    env = make_vec("GPUPendulum-v1", 300, device="cuda", backend="cuda")
    twin = make_vec("GPUPendulum-v1", 300, device="cuda", backend="cuda")
    env.reset(seed=4)
    twin.reset(seed=4)
    twin.sample_actions()  # the call that makes the sampler, before any capture
    env.sample_actions()
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph):
        static = env.sample_actions()
    torch.cuda.current_stream().wait_stream(stream)
    # capturing launched nothing: the counts are where the eager call left them
    for _ in range(5):
        graph.replay()
        assert torch.equal(static, twin.sample_actions())


def test_the_first_call_inside_a_capture_is_refused():
    env = make_vec("GPUCartPole-v1", 8, device="cuda")
    env.reset(seed=0)
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with pytest.raises(RuntimeError, match="before capturing"):
        with torch.cuda.stream(stream), torch.cuda.graph(graph):
            env.sample_actions()


@pytest.mark.parametrize("env_id", ["GPUCartPole-v1", "GPUMountainCarContinuous-v0",
                                    "GPUTag-v0"])
def test_a_captured_random_rollout_equals_the_eager_loop(env_id):
    steps, calls = 5, 5
    env = make_vec(env_id, 16, device="cuda", copy=False)
    reference = make_vec(env_id, 16, device="cuda", copy=False)
    rollout = gpu_vecenv.capture_rollout(env, lambda obs: env.sample_actions(), steps)
    obs, _ = env.reset(seed=9)
    reference_obs, _ = reference.reset(seed=9)
    trajectories = []
    for _ in range(calls):
        trajectories.append(rollout(obs).clone())
        obs = rollout.trajectory.next_obs
    assert rollout.captured
    for traj in trajectories:
        rows, reference_obs = _eager_reference(reference, lambda o: reference.sample_actions(),
                                               reference_obs, steps)
        _assert_trajectory_equals(traj, rows, reference_obs)
    assert torch.equal(env._action_sampler.counters, reference._action_sampler.counters)


@pytest.mark.parametrize("space", [
    gymnasium.spaces.Discrete(7, start=-3),
    gymnasium.spaces.MultiDiscrete([2, 9, 2**31, 1, 5, 3], start=[0, -4, 7, 0, 1, 2]),
    gymnasium.spaces.Box(-1.0, 2.0, (3,), np.float32),
    gymnasium.spaces.Box(np.linspace(-9, 0, 9, dtype=np.float32),
                         np.linspace(1, 5, 9, dtype=np.float32)),
], ids=["discrete", "multidiscrete-6", "box-3", "box-9"])
@pytest.mark.parametrize("slots_per_seed", [1, 3])
def test_the_kernel_draws_every_component_as_the_definition(space, slots_per_seed):
    # Components 0-3 reach the kernel as arguments, the rest through memory: both, and
    # spaces of fewer than four.
    n = 3 * 250
    seeds = torch.as_tensor(np.random.default_rng(5).integers(-(2**63), 2**63 - 1,
                                                              n // slots_per_seed),
                            device="cuda")
    kernel, reference = (ActionSampler(space, n, slots_per_seed, torch.device("cuda"),
                                       use_kernel=use) for use in (True, False))
    for _ in range(3):
        a, b = kernel.sample(seeds), reference.sample(seeds)
        assert a.dtype == b.dtype and a.shape == b.shape == (n, *space.shape)
        assert torch.equal(a.view(torch.int32) if a.is_floating_point() else a,
                           b.view(torch.int32) if b.is_floating_point() else b)
    assert torch.equal(kernel.counters, reference.counters)
