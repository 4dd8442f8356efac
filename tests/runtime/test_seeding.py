"""The counter-based RNG: known-answer vectors, purity, and seeding through the env."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpu_vecenv import seeding
from gpu_vecenv.vector_env import GpuVectorEnv
from tests.runtime.counting_env import COUNTING


def _philox(counter, key):
    out = seeding.philox4x32(tuple(torch.tensor([c]) for c in counter),
                             tuple(torch.tensor([k]) for k in key))
    return [int(v) for v in out]


@pytest.mark.parametrize(
    ("counter", "key", "expected"),
    [  # Random123's kat_vectors for philox4x32_10
        ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
        ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
        ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
         [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
    ],
)
def test_philox_known_answers(counter, key, expected):
    assert _philox(counter, key) == expected
    assert list(seeding.philox4x32_ints(tuple(counter), tuple(key))) == expected


def test_draw_is_a_pure_function_of_seed_index_counter():
    seed = torch.full((6,), 1234, dtype=torch.int64)
    index = torch.tensor([0, 1, 2, 0, 1, 2])
    counter = torch.tensor([0, 0, 0, 5, 5, 5])
    words = seeding.random_words(seed, index, counter, 7)
    assert words.shape == (6, 7) and words.dtype == torch.int64
    assert (words >= 0).all() and (words < 2**32).all()
    # The same (seed, index, counter) in another batch position gives the same words.
    alone = seeding.random_words(seed[4:5], index[4:5], counter[4:5], 7)
    assert torch.equal(alone[0], words[4])
    # Words 4..7 are block 1 of the same draw.
    first = seeding.philox4x32((torch.tensor(5), torch.tensor(1), torch.tensor(1),
                                torch.tensor(0)), seeding.seed_key(torch.tensor(1234)))
    assert [int(v) for v in first][:3] == words[4, 4:7].tolist()
    assert len({tuple(r) for r in words.tolist()}) == 6


def test_uniform_range_and_exactness():
    words = torch.tensor([0, 255, 256, 2**32 - 1])
    u = seeding.uniform_from_words(words)
    assert u.dtype == torch.float32
    assert u.tolist() == [0.0, 0.0, 2**-24, 1 - 2**-24]


def test_large_and_negative_int64_seeds():
    big = seeding.seed_as_int64(2**64 - 1)
    assert big == -1
    lo, hi = seeding.seed_key(torch.tensor([big]))
    assert lo.item() == 0xFFFFFFFF and hi.item() == 0xFFFFFFFF
    with pytest.raises(ValueError):
        seeding.check_seed(-1)
    with pytest.raises(ValueError):
        seeding.check_seed(2**64)
    with pytest.raises(TypeError):
        seeding.check_seed(1.5)
    assert seeding.check_seed(np.int64(7)) == 7


def _cartpole(n=64, **kw):
    from gpu_vecenv.envs.cartpole import DEFINITION

    return GpuVectorEnv(DEFINITION, n, device="cpu", **kw)


def _rollout(env, seed, steps=60):
    obs, _ = env.reset(seed=seed)
    trace = [obs]
    actions = np.arange(env.num_envs) % 2
    for t in range(steps):
        trace.append(env.step((actions + t) % 2)[0])
    return torch.stack(trace)


def test_same_seed_same_run_and_different_seeds_differ():
    a = _rollout(_cartpole(), 7)
    b = _rollout(_cartpole(), 7)
    c = _rollout(_cartpole(), 8)
    assert torch.equal(a, b)
    assert not torch.equal(a[0], c[0])
    # Envs of one batch get different initial states.
    assert len({tuple(r) for r in a[0].tolist()}) == a.shape[1]


def test_reset_with_seed_reseeds_and_none_continues():
    env = _cartpole()
    first, _ = env.reset(seed=3)
    again, _ = env.reset(seed=3)
    assert torch.equal(first, again)
    following, _ = env.reset()
    assert not torch.equal(first, following)
    fresh = _cartpole()
    fresh.reset(seed=3)
    assert torch.equal(fresh.reset()[0], following), "seed=None continues the stream"


def test_unseeded_envs_differ():
    assert not torch.equal(_cartpole().reset()[0], _cartpole().reset()[0])


def test_list_of_seeds_is_per_env():
    env = _cartpole(n=3)
    obs, _ = env.reset(seed=[5, 6, 7])
    env.reset(seed=[1, 6, 2])
    second, _ = env.reset(seed=[1, 6, 2])
    assert not torch.equal(obs[0], second[0])
    assert torch.equal(obs[1], second[1]), "env 1 has the same seed and counter both times"
    with pytest.raises(ValueError, match="num_envs=3"):
        env.reset(seed=[1, 2])


def test_autoreset_draws_are_independent_of_other_envs():
    """An env's k-th episode starts the same whatever the other envs do."""
    env_a = GpuVectorEnv(COUNTING, 2, device="cpu")
    from gpu_vecenv.envs.cartpole import DEFINITION

    one = GpuVectorEnv(DEFINITION, 4, device="cpu", max_episode_steps=5)
    two = GpuVectorEnv(DEFINITION, 4, device="cpu", max_episode_steps=7)
    one.reset(seed=11)
    two.reset(seed=11)
    for _ in range(5):
        one.step(np.zeros(4, dtype=np.int64))
    for _ in range(7):
        two.step(np.zeros(4, dtype=np.int64))
    # Both have now drawn their second initial state (counter 1) on the autoreset step.
    obs_one = one.step(np.zeros(4, dtype=np.int64))[0]
    obs_two = two.step(np.zeros(4, dtype=np.int64))[0]
    assert torch.equal(obs_one, obs_two)
    assert env_a.num_envs == 2


def test_resets_inside_observation_space():
    env = _cartpole(n=2048)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs.numpy())
    assert obs.abs().max() < 0.05
