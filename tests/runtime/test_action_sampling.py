"""``env.sample_actions()`` on the CPU (torch backend): the definition against a textbook
Philox on Python ints, the actions' forms and distribution, reproducibility from the env's
seeds, restarts on reseeding, and the errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv import seeding
from gpu_vecenv.action_sampling import ActionSampler, describe_space, sample_reference
from gpu_vecenv.entry_points import make_vec
from gpu_vecenv.env_ids import shipped_ids

SHIPPED = shipped_ids()


def _textbook(seed: int, slot: int, counter: int, dims: int) -> list[int]:
    """Words 0..dims-1 of the draw, from Random123's philox4x32-10 on Python ints."""
    key = (seed % 2**64 & seeding.MASK32, (seed % 2**64) >> 32)
    words = []
    for block in range((dims + 3) // 4):
        words += seeding.philox4x32_ints((counter % 2**32, slot % 2**32, block,
                                          seeding.STREAM_ACTIONS), key)
    return words[:dims]


def test_discrete_definition_matches_the_textbook_philox():
    rng = np.random.default_rng(5)
    n, start, nvec = 64, np.array([-3, 0, 7, 1, 0]), np.array([2, 11, 2**31, 1, 5])
    seed = torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64))
    counter = torch.from_numpy(rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int64)).int()
    slot = torch.arange(n)
    got = sample_reference("discrete", torch.as_tensor(start), torch.as_tensor(nvec), seed,
                           slot, counter)
    for s in range(n):
        words = _textbook(int(seed[s]), s, int(counter[s]), len(start))
        expected = [int(a) + (w * int(c)) // 2**32
                    for w, a, c in zip(words, start, nvec, strict=True)]
        assert got[s].tolist() == expected


def test_box_definition_matches_the_textbook_philox():
    rng = np.random.default_rng(6)
    n = 32
    low = np.array([-2.0, 0.25, -1e30], dtype=np.float32)
    high = np.array([2.0, 0.5, 1e30], dtype=np.float32)
    seed = torch.from_numpy(rng.integers(0, 2**63 - 1, n, dtype=np.int64))
    counter = torch.from_numpy(rng.integers(0, 2**31 - 1, n, dtype=np.int64))
    got = sample_reference("box", torch.from_numpy(low), torch.from_numpy(high), seed,
                           torch.arange(n), counter).numpy()
    for s in range(n):
        words = _textbook(int(seed[s]), s, int(counter[s]), 3)
        u = np.array([(w >> 8) * 2.0**-24 for w in words], dtype=np.float32)
        expected = u * (high - low) + low  # float32 throughout, span rounded first
        np.testing.assert_array_equal(got[s], expected)
        assert ((got[s] >= low) & (got[s] <= high)).all()


@pytest.mark.parametrize("env_id", SHIPPED)
def test_actions_have_the_step_form_and_lie_in_the_space(env_id):
    env = make_vec(env_id, 6, strict=True)
    env.reset(seed=1)
    for _ in range(20):
        action = env.sample_actions()
        assert action.dtype == env.actions.dtype and tuple(action.shape) == env.actions.shape
        assert action.device == env.device
        for row in action.numpy():
            assert env.single_action_space.contains(
                row.astype(env.single_action_space.dtype)), row
        env.step(action)  # strict: any invalid action would raise


def test_the_same_seed_gives_the_same_actions_and_calls_differ():
    env = make_vec("GPUCartPole-v1", 64)
    env.reset(seed=7)
    first = [env.sample_actions() for _ in range(3)]
    assert not torch.equal(first[0], first[1])
    assert not torch.equal(first[0], first[0].roll(1))  # envs differ from each other
    env.reset(seed=7)
    again = [env.sample_actions() for _ in range(3)]
    for a, b in zip(first, again, strict=True):
        assert torch.equal(a, b)
    env.reset(seed=8)
    assert not torch.equal(env.sample_actions(), first[0])
    env.reset()  # no seed: the streams go on
    assert not torch.equal(env.sample_actions(), first[0])


def test_actions_do_not_depend_on_steps_or_on_when_the_sampler_was_made():
    a = make_vec("GPUPendulum-v1", 8)
    b = make_vec("GPUPendulum-v1", 8)
    a.reset(seed=3)
    a.sample_actions()  # made before the reseed below
    a.reset(seed=4)
    b.reset(seed=4)
    b.step(torch.zeros(8, 1))
    assert torch.equal(a.sample_actions(), b.sample_actions())


def test_a_masked_reseed_restarts_only_the_envs_it_seeds():
    env = make_vec("GPUCartPole-v1", 4, autoreset_mode=AutoresetMode.DISABLED)
    env.reset(seed=[10, 11, 12, 13])
    first = torch.stack([env.sample_actions() for _ in range(16)])
    env.reset(seed=[10, 99, 12, 99], options={"reset_mask": np.array([1, 0, 1, 0], bool)})
    again = torch.stack([env.sample_actions() for _ in range(16)])
    assert torch.equal(again[:, [0, 2]], first[:, [0, 2]])
    assert not torch.equal(again[:, [1, 3]], first[:, [1, 3]])


def test_a_game_shares_its_seed_and_restarts_as_one():
    env = make_vec("GPUTagGrid-v0", 3, autoreset_mode=AutoresetMode.DISABLED)
    agents = env.num_agents
    env.reset(seed=[1, 2, 3])
    first = torch.stack([env.sample_actions() for _ in range(8)])
    env.reset(seed=[1, 5, 6], options={"reset_mask": np.array([1, 0, 0], bool)})
    again = torch.stack([env.sample_actions() for _ in range(8)])
    assert torch.equal(again[:, :agents], first[:, :agents])
    assert not torch.equal(again[:, agents:], first[:, agents:])
    counters = env._action_sampler.counters.view(3, agents)
    assert counters[0].eq(8).all() and counters[1:].eq(16).all()


def test_discrete_actions_are_uniform():
    env = make_vec("GPUTag-v0", 50)  # MultiDiscrete([11, 11]) per slot
    env.reset(seed=0)
    draws = torch.cat([env.sample_actions() for _ in range(40)])  # (n * 40, 2)
    space = env.single_action_space
    for k, choices in enumerate(space.nvec):
        counts = torch.bincount(draws[:, k] - int(space.start[k]), minlength=int(choices))
        assert len(counts) == choices
        expected = len(draws) / choices
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        assert chi2 < 40.0, (k, counts)  # 10 degrees of freedom: p < 1e-5 by chance


def test_box_actions_are_uniform_over_the_bounds():
    env = make_vec("GPUPendulum-v1", 1000)
    env.reset(seed=0)
    draws = torch.cat([env.sample_actions() for _ in range(20)]).flatten()
    assert draws.min() >= -2.0 and draws.max() < 2.0
    counts = torch.histc(draws, bins=8, min=-2.0, max=2.0)
    expected = len(draws) / 8
    assert float(((counts - expected) ** 2 / expected).sum()) < 35.0  # 7 dof


def test_counts_wrap_at_32_bits_as_the_kernel_does():
    sampler = ActionSampler(gym.spaces.Discrete(3), 2, 1, torch.device("cpu"), use_kernel=False)
    seeds = torch.tensor([4, 4])
    sampler.counters.fill_(2**31 - 1)
    sampler.sample(seeds)
    assert sampler.counters.tolist() == [-(2**31)] * 2
    expected = sample_reference("discrete", sampler.low, sampler.high, seeds,
                                torch.arange(2), torch.tensor([2**31, 2**31]))
    assert torch.equal(sampler.sample(seeds), expected.view(2))


def test_errors():
    env = make_vec("GPUCartPole-v1", 2)
    with pytest.raises(gym.error.ResetNeeded):
        env.sample_actions()
    env.reset(seed=0)
    env.close()
    with pytest.raises(gym.error.ClosedEnvironmentError):
        env.sample_actions()
    with pytest.raises(ValueError, match="bounded Box"):
        describe_space(gym.spaces.Box(-np.inf, 1.0, (2,)))
    with pytest.raises(ValueError, match="bounded Box"):
        describe_space(gym.spaces.Box(-3e38, 3e38, (1,)))
    with pytest.raises(ValueError, match="2\\*\\*31"):
        describe_space(gym.spaces.Discrete(2**31 + 1))
    with pytest.raises(TypeError, match="does not support"):
        describe_space(gym.spaces.Dict({"a": gym.spaces.Discrete(2)}))


def test_the_batched_pettingzoo_view_splits_the_slots_actions():
    import gpu_vecenv

    par = gpu_vecenv.parallel_env("GPUTag-v0", 3, device="cpu")
    twin = make_vec("GPUTag-v0", 3)
    par.reset(seed=2)
    twin.reset(seed=2)
    actions = par.sample_actions()
    assert list(actions) == par.possible_agents
    slots = twin.sample_actions().view(3, twin.num_agents, 2)
    for i, name in enumerate(par.possible_agents):
        assert torch.equal(actions[name], slots[:, i])
        for row in actions[name].numpy():
            assert par.action_space(name).contains(row)
    par.step(actions)
