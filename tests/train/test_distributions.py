"""Action distributions against torch.distributions, and seeded sampling."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from gpu_vecenv.train import distributions as dist
from gpu_vecenv.train.distributions import ActionSpec


def test_discrete_matches_categorical():
    spec = ActionSpec.from_space(gym.spaces.Discrete(3))
    logits = torch.tensor([[0.1, -0.5, 2.0], [1.0, 1.0, 1.0]])
    action = torch.tensor([2, 0])
    log_prob, entropy = dist.log_prob_and_entropy(spec, logits, None, action)
    ref = torch.distributions.Categorical(logits=logits)
    torch.testing.assert_close(log_prob, ref.log_prob(action))
    torch.testing.assert_close(entropy, ref.entropy())
    torch.testing.assert_close(entropy[1], torch.tensor(math.log(3.0)))
    assert dist.mode(spec, logits).tolist() == [2, 0]


def test_discrete_start_offset():
    spec = ActionSpec.from_space(gym.spaces.Discrete(3, start=-1))
    logits = torch.tensor([[0.0, 5.0, 0.0]])
    assert dist.mode(spec, logits).tolist() == [0]
    log_prob, _ = dist.log_prob_and_entropy(spec, logits, None, torch.tensor([0]))
    torch.testing.assert_close(log_prob, torch.log_softmax(logits, -1)[:, 1])


def test_sampling_frequencies_follow_the_probabilities():
    spec = ActionSpec.from_space(gym.spaces.Discrete(3))
    probs = torch.tensor([0.2, 0.5, 0.3])
    logits = torch.log(probs).expand(40_000, 3)
    g = torch.Generator().manual_seed(0)
    counts = torch.bincount(dist.sample(spec, logits, None, g), minlength=3).float() / 40_000
    torch.testing.assert_close(counts, probs, atol=0.01, rtol=0)


def test_sampling_is_seeded():
    spec = ActionSpec.from_space(gym.spaces.MultiDiscrete([4, 5]))
    logits = torch.zeros(100, 9)
    a = dist.sample(spec, logits, None, torch.Generator().manual_seed(3))
    b = dist.sample(spec, logits, None, torch.Generator().manual_seed(3))
    c = dist.sample(spec, logits, None, torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.shape == (100, 2) and int(a[:, 0].max()) <= 3 and int(a[:, 1].max()) <= 4


def test_multidiscrete_sums_independent_dimensions():
    spec = ActionSpec.from_space(gym.spaces.MultiDiscrete(np.array([2, 3])))
    assert spec.head_size == 5 and spec.action_shape == (2,)
    logits = torch.tensor([[0.3, -0.3, 1.0, 0.0, -1.0]])
    action = torch.tensor([[1, 2]])
    log_prob, entropy = dist.log_prob_and_entropy(spec, logits, None, action)
    a = torch.distributions.Categorical(logits=logits[:, :2])
    b = torch.distributions.Categorical(logits=logits[:, 2:])
    torch.testing.assert_close(log_prob, a.log_prob(action[:, 0]) + b.log_prob(action[:, 1]))
    torch.testing.assert_close(entropy, a.entropy() + b.entropy())


def test_box_matches_normal():
    spec = ActionSpec.from_space(gym.spaces.Box(-2.0, 2.0, (2,), np.float32))
    mean = torch.tensor([[0.5, -1.0]])
    log_std = torch.tensor([0.0, -0.5])
    action = torch.tensor([[1.0, -0.2]])
    log_prob, entropy = dist.log_prob_and_entropy(spec, mean, log_std, action)
    ref = torch.distributions.Normal(mean, log_std.exp())
    torch.testing.assert_close(log_prob, ref.log_prob(action).sum(-1))
    torch.testing.assert_close(entropy, ref.entropy().sum(-1))
    sampled = dist.sample(spec, mean.expand(20_000, 2), log_std, torch.Generator().manual_seed(0))
    torch.testing.assert_close(sampled.std(0), log_std.exp(), atol=0.02, rtol=0)


def test_unsupported_space():
    with pytest.raises(TypeError):
        ActionSpec.from_space(gym.spaces.Dict({"a": gym.spaces.Discrete(2)}))


@pytest.mark.parametrize("space", [gym.spaces.Discrete(3, start=1),
                                   gym.spaces.MultiDiscrete([2, 3], start=[0, -1])])
def test_nan_logits_sample_an_action_outside_the_space(space):
    """A diverged network (NaN logits) must not act: its rows get start - 1, which the env
    reports as an invalid action; other rows sample as usual."""
    spec = ActionSpec.from_space(space)
    logits = torch.zeros(4, spec.head_size)
    logits[1, 0] = float("nan")
    actions = dist.sample(spec, logits, None, torch.Generator().manual_seed(0))
    rows = actions.reshape(4, -1)
    start = torch.tensor(spec.start)
    assert torch.equal(rows[1, 0], start[0] - 1)
    valid = torch.ones(4, dtype=torch.bool)
    valid[1] = False
    assert all(space.contains(a.numpy()) if a.ndim else space.contains(int(a))
               for a in actions[valid])
    log_prob, _ = dist.log_prob_and_entropy(spec, logits, None, actions)
    assert torch.isnan(log_prob[1]) and torch.isfinite(log_prob[valid]).all()


@pytest.mark.parametrize("space", [gym.spaces.Discrete(5, start=2),
                                   gym.spaces.MultiDiscrete([3, 7, 2], start=[0, 1, -1]),
                                   gym.spaces.Box(-1.0, 2.0, (3,))])
def test_log_prob_alone_is_the_log_prob_of_log_prob_and_entropy_bit_for_bit(space):
    spec = ActionSpec.from_space(space)
    g = torch.Generator().manual_seed(4)
    params = torch.randn(64, spec.head_size, generator=g) * 3
    log_std = torch.randn(spec.head_size, generator=g) if spec.kind == "box" else None
    action = dist.sample(spec, params, log_std, g)
    both, entropy = dist.log_prob_and_entropy(spec, params, log_std, action)
    alone = dist.log_prob(spec, params, log_std, action)
    assert torch.equal(alone, both) and both.shape == entropy.shape == (64,)


@pytest.mark.parametrize("space", [gym.spaces.Discrete(5, start=2),
                                   gym.spaces.MultiDiscrete([4, 4], start=[1, -2]),
                                   gym.spaces.MultiDiscrete([3, 7, 2])])
def test_sampling_draws_one_uniform_per_logit_in_the_logits_layout(space):
    """Gumbel-max with the uniforms of one ``rand((B, sum(nvec)))`` call: the fused
    kernels' noise layout (test_fused_gpu feeds them the same), for equal and unequal
    category counts."""
    spec = ActionSpec.from_space(space)
    logits = torch.randn(500, spec.head_size, generator=torch.Generator().manual_seed(1)) * 2
    actions = dist.sample(spec, logits, None, torch.Generator().manual_seed(9))
    u = torch.rand(logits.shape, generator=torch.Generator().manual_seed(9))
    scores = logits - torch.log(-torch.log(u.clamp(min=torch.finfo(u.dtype).tiny)))
    expected = torch.stack([p.argmax(-1) for p in scores.split(list(spec.nvec), -1)], -1)
    expected = expected + torch.tensor(spec.start)
    assert torch.equal(actions.reshape(expected.shape), expected)
    assert actions.shape == (500, *spec.action_shape)


def test_equal_sized_dimensions_take_the_loops_values_bit_for_bit(monkeypatch):
    """Tag's two equal dimensions run as one ``(B, 2, n)`` block: the same log-probs,
    entropies, modes and NaN handling as the per-dimension loop."""
    spec = ActionSpec.from_space(gym.spaces.MultiDiscrete([6, 6], start=[0, 3]))
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(300, 12, generator=g) * 3
    logits[7, 8] = float("nan")  # a diverged row: its second dimension only
    actions = dist.sample(spec, logits, None, g)
    assert actions[7, 1] == spec.start[1] - 1 and actions[7, 0] >= spec.start[0]
    blocks = dist.log_prob_and_entropy(spec, logits, None, actions), dist.mode(spec, logits)
    monkeypatch.setattr(dist, "_blocks", lambda logits, spec: None)
    loop = dist.log_prob_and_entropy(spec, logits, None, actions), dist.mode(spec, logits)
    for a, b in zip((*blocks[0], blocks[1]), (*loop[0], loop[1]), strict=True):
        assert torch.equal(a, b) or torch.equal(torch.isnan(a), torch.isnan(b)) and \
            torch.equal(a[~torch.isnan(a)], b[~torch.isnan(b)])
    assert torch.isnan(blocks[0][0][7]) and torch.isfinite(blocks[0][0][:7]).all()
