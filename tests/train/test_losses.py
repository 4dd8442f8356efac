"""Losses and return estimators against numbers worked out by hand (in the comments)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from gpu_vecenv.train import losses

GAMMA, LAM = 0.9, 0.8


def col(*values, dtype=torch.float32):
    """A (T, 1) column: T steps of one env."""
    return torch.tensor(values, dtype=dtype).unsqueeze(1)


REWARDS = col(1.0, 1.0, 1.0)
VALUES = col(0.5, 0.4, 0.3)
FALSE = col(False, False, False, dtype=torch.bool)


def test_gae_without_episode_end():
    # deltas: 1 + .9*.4 - .5 = .86, 1 + .9*.3 - .4 = .87, 1 + .9*.2 - .3 = .88
    # A2 = .88; A1 = .87 + .72*.88 = 1.5036; A0 = .86 + .72*1.5036 = 1.942592
    adv, ret = losses.gae_advantages(REWARDS, VALUES, col(0.4, 0.3, 0.2), FALSE, FALSE,
                                     GAMMA, LAM)
    torch.testing.assert_close(adv, col(1.942592, 1.5036, 0.88))
    torch.testing.assert_close(ret, col(2.442592, 1.9036, 1.18))


def test_gae_terminated_does_not_bootstrap():
    # Terminated at t=1: V(final_obs)=5 is ignored. delta1 = 1 - .4 = .6, A1 = .6 (the
    # recursion is cut), A0 = .86 + .72*.6 = 1.292, A2 = .88.
    term = col(False, True, False, dtype=torch.bool)
    adv, _ = losses.gae_advantages(REWARDS, VALUES, col(0.4, 5.0, 0.2), term, term, GAMMA,
                                   LAM)
    torch.testing.assert_close(adv, col(1.292, 0.6, 0.88))


def test_gae_truncated_bootstraps_final_obs():
    # Truncated at t=1: delta1 = 1 + .9*5 - .4 = 5.1, A1 = 5.1, A0 = .86 + .72*5.1 = 4.532.
    done = col(False, True, False, dtype=torch.bool)
    adv, _ = losses.gae_advantages(REWARDS, VALUES, col(0.4, 5.0, 0.2), FALSE, done, GAMMA,
                                   LAM)
    torch.testing.assert_close(adv, col(4.532, 5.1, 0.88))


def test_gae_envs_are_independent():
    next_values = torch.cat([col(0.4, 0.3, 0.2), col(0.4, 5.0, 0.2)], dim=1)
    term = torch.cat([FALSE, col(False, True, False, dtype=torch.bool)], dim=1)
    adv, _ = losses.gae_advantages(REWARDS.repeat(1, 2), VALUES.repeat(1, 2), next_values,
                                   term, term, GAMMA, LAM)
    torch.testing.assert_close(adv[:, 0], torch.tensor([1.942592, 1.5036, 0.88]))
    torch.testing.assert_close(adv[:, 1], torch.tensor([1.292, 0.6, 0.88]))


@pytest.mark.parametrize(
    "terminated, done, next_values, expected",
    [
        # G2 = 1 + .9*.2 = 1.18; G1 = 1 + .9*1.18 = 2.062; G0 = 1 + .9*2.062 = 2.8558
        ((False, False, False), (False, False, False), (0.4, 0.3, 0.2), (2.8558, 2.062, 1.18)),
        # truncated at 1: G1 = 1 + .9*5 = 5.5, G0 = 1 + .9*5.5 = 5.95
        ((False, False, False), (False, True, False), (0.4, 5.0, 0.2), (5.95, 5.5, 1.18)),
        # terminated at 1: G1 = 1, G0 = 1.9
        ((False, True, False), (False, True, False), (0.4, 5.0, 0.2), (1.9, 1.0, 1.18)),
    ],
)
def test_nstep_returns(terminated, done, next_values, expected):
    term = col(*terminated, dtype=torch.bool)
    d = col(*done, dtype=torch.bool)
    returns = losses.nstep_returns(REWARDS, col(*next_values), term, d, GAMMA)
    torch.testing.assert_close(returns, col(*expected))
    # n-step returns are GAE with lambda = 1
    _, gae_returns = losses.gae_advantages(REWARDS, VALUES, col(*next_values), term, d,
                                           GAMMA, 1.0)
    torch.testing.assert_close(returns, gae_returns)


def test_clipped_surrogate_loss():
    # ratios 1.5, .5, 1.5, .5; advantages 2, 2, -1, -1; clip .2:
    # max(-2*1.5, -2*1.2) = -2.4; max(-2*.5, -2*.8) = -1; max(1.5, 1.2) = 1.5;
    # max(.5, .8) = .8; mean = (-2.4 - 1 + 1.5 + .8) / 4 = -.275
    new = torch.log(torch.tensor([1.5, 0.5, 1.5, 0.5]))
    old = torch.zeros(4)
    adv = torch.tensor([2.0, 2.0, -1.0, -1.0])
    loss = losses.clipped_surrogate_loss(new, old, adv, 0.2)
    torch.testing.assert_close(loss, torch.tensor(-0.275))


def test_surrogate_at_ratio_one_is_the_policy_gradient():
    new = torch.tensor([-0.3, -1.2], requires_grad=True)
    adv = torch.tensor([1.0, -2.0])
    losses.clipped_surrogate_loss(new, new.detach(), adv, 0.2).backward()
    # d/dnew of -mean(A * exp(new - old)) at new = old is -A / 2
    torch.testing.assert_close(new.grad, torch.tensor([-0.5, 1.0]))


def test_ratio_statistics():
    # k3: (r - 1) - log r = .5 - ln 1.5 = .0945349, -.5 - ln .5 = .1931472; mean .1438410
    new = torch.log(torch.tensor([1.5, 0.5]))
    kl, clip_fraction = losses.ratio_statistics(new, torch.zeros(2), 0.2)
    torch.testing.assert_close(kl, torch.tensor(0.1438410))
    torch.testing.assert_close(clip_fraction, torch.tensor(1.0))
    kl, clip_fraction = losses.ratio_statistics(torch.zeros(3), torch.zeros(3), 0.2)
    assert float(kl) == 0.0 and float(clip_fraction) == 0.0


def test_value_loss_plain_and_clipped():
    new, old, ret = torch.tensor([2.0, 0.0]), torch.tensor([1.0, 1.0]), torch.tensor([3.0, 0.5])
    # unclipped: .5 * mean((2-3)^2, (0-.5)^2) = .5 * .625 = .3125
    torch.testing.assert_close(losses.value_loss(new, ret), torch.tensor(0.3125))
    # clipped (c=.5): V_clip = 1.5, .5 -> errors 2.25, 0; max with 1, .25 -> 2.25, .25;
    # .5 * mean = .625
    torch.testing.assert_close(losses.value_loss(new, ret, old, 0.5), torch.tensor(0.625))
    with pytest.raises(ValueError):
        losses.value_loss(new, ret, None, 0.5)


def test_policy_gradient_loss_and_entropy():
    log_prob = torch.tensor([-1.0, -2.0])
    adv = torch.tensor([1.0, 3.0])
    # -mean(1*-1, 3*-2) = -(-7/2) = 3.5
    torch.testing.assert_close(losses.policy_gradient_loss(log_prob, adv), torch.tensor(3.5))
    torch.testing.assert_close(losses.entropy_bonus(torch.tensor([0.5, 1.5])),
                               torch.tensor(1.0))


def test_normalize_advantages():
    out = losses.normalize_advantages(torch.tensor([1.0, 2.0, 3.0]))
    # mean 2, unbiased std 1 -> -1, 0, 1
    torch.testing.assert_close(out, torch.tensor([-1.0, 0.0, 1.0]))


def test_ddpg_targets_and_losses():
    reward = torch.tensor([1.0, 1.0, 1.0])
    next_q = torch.tensor([10.0, 10.0, 10.0])
    # row 1 terminated (no bootstrap); row 2 truncated (terminated False: bootstraps)
    terminated = torch.tensor([False, True, False])
    target = losses.ddpg_critic_target(reward, next_q, terminated, 0.9)
    torch.testing.assert_close(target, torch.tensor([10.0, 1.0, 10.0]))
    # mean((9-10)^2, (2-1)^2, 0) = 2/3
    q = torch.tensor([9.0, 2.0, 10.0])
    torch.testing.assert_close(losses.ddpg_critic_loss(q, target), torch.tensor(2.0 / 3.0))
    torch.testing.assert_close(losses.ddpg_actor_loss(torch.tensor([1.0, 2.0, 3.0])),
                               torch.tensor(-2.0))
    assert not losses.ddpg_critic_target(reward, next_q.requires_grad_(), terminated,
                                         0.9).requires_grad


def test_soft_update():
    target, source = nn.Linear(2, 1), nn.Linear(2, 1)
    nn.init.zeros_(target.weight), nn.init.zeros_(target.bias)
    nn.init.ones_(source.weight), nn.init.ones_(source.bias)
    losses.soft_update(target, source, 0.1)
    torch.testing.assert_close(target.weight, torch.full((1, 2), 0.1))
    losses.soft_update(target, source, 0.1)  # .9*.1 + .1 = .19
    torch.testing.assert_close(target.bias, torch.tensor([0.19]))
    assert math.isclose(float(source.weight.detach()[0, 0]), 1.0)
