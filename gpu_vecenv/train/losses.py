"""Losses and return estimators as pure functions of tensors (no modules, no state).

Shapes: ``T`` roll-out steps, ``N`` envs (agent slots) of one policy, ``B`` a minibatch.
Everything here is tested against numbers worked out by hand in
``tests/train/test_losses.py``.

Weights: the minibatch losses and statistics take optional ``weights`` ``(B,)``; with them a
mean over the batch becomes ``sum(x * weights)`` (:func:`gpu_vecenv.train.masked.row_weights`
makes weights that give the mean over live rows, idle multi-agent slots weighing 0).
Without them they compute exactly the plain means.

Truncation convention used throughout: a step's ``next_values`` is the value of the
observation that *followed* the action, i.e. ``V(final_obs)`` where the episode ended on
that step and ``V(obs_{t+1})`` elsewhere. ``terminated`` zeroes the bootstrap (the
episode really ended); ``done = terminated | truncated`` only cuts the recursion (the
next row belongs to a new episode), so a truncated step still bootstraps from
``V(final_obs)``.
"""

from __future__ import annotations

import torch


def gae_advantages(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    done: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation, GAE(lambda), with terminated/truncated split.

    ``delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t`` and
    ``A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}`` with ``A_T = 0``.

    Args:
        rewards, values, next_values: ``(T, N)`` float.
        terminated, done: ``(T, N)`` bool; ``done`` must include ``terminated``.
        gamma: discount; gae_lambda: lambda (1.0 gives n-step returns).

    Returns:
        ``(advantages, returns)``, both ``(T, N)``, with ``returns = advantages + values``.
    """
    not_terminated = (~terminated).to(rewards.dtype)
    not_done = (~done).to(rewards.dtype)
    deltas = rewards + gamma * not_terminated * next_values - values
    decay = gamma * gae_lambda * not_done
    advantages = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = deltas[t] + decay[t] * running
        advantages[t] = running
    return advantages, advantages + values


def nstep_returns(
    rewards: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    done: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """Discounted returns to the end of the roll-out or episode, bootstrapped there
    (A2C's n-step returns): ``G_t = r_t + gamma * (1 - terminated_t) * next_values_t`` if
    the episode ended at ``t`` (or ``t`` is the last row), else ``r_t + gamma * G_{t+1}``.

    Shapes: all ``(T, N)``; returns ``(T, N)``. Equals ``gae_advantages(..., 1.0)[1]``.
    """
    not_terminated = (~terminated).to(rewards.dtype)
    returns = torch.empty_like(rewards)
    following = torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        bootstrap = gamma * not_terminated[t] * next_values[t]
        if t < rewards.shape[0] - 1:
            bootstrap = torch.where(done[t], bootstrap, gamma * following)
        following = rewards[t] + bootstrap
        returns[t] = following
    return returns


def weighted_mean(x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """``x.mean()``, or ``(x * weights).sum()`` with ``weights`` (``x``'s shape)."""
    return x.mean() if weights is None else (x * weights).sum()


def normalize_advantages(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(a - mean) / (std + eps)`` over all elements (unbiased std)."""
    return (advantages - advantages.mean()) / (advantages.std() + eps)


def clipped_surrogate_loss(
    new_log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    clip_coef: float,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """PPO's clipped policy loss (to minimize):
    ``mean(max(-A * r, -A * clip(r, 1 - eps, 1 + eps)))`` with ``r = exp(new - old)``
    (weighted: see the module docstring).

    ``old_log_prob`` must be the log-probability stored at roll-out time, so that the
    ratio moves away from 1 after the first gradient step. Shapes: ``(B,)``; returns ``()``.
    """
    ratio = torch.exp(new_log_prob - old_log_prob)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef)
    return weighted_mean(torch.max(unclipped, clipped), weights)


def policy_gradient_loss(log_prob: torch.Tensor, advantages: torch.Tensor,
                         weights: torch.Tensor | None = None) -> torch.Tensor:
    """A2C's policy loss ``-mean(A * log pi(a|s))`` (advantages carry no gradient)."""
    return -weighted_mean(advantages.detach() * log_prob, weights)


def ratio_statistics(
    new_log_prob: torch.Tensor, old_log_prob: torch.Tensor, clip_coef: float,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(approx_kl, clip_fraction)``: the k3 estimator ``mean((r - 1) - log r)`` of
    KL(old || new) and the fraction of samples with ``|r - 1| > clip_coef``. ``()`` each."""
    log_ratio = new_log_prob - old_log_prob
    ratio = torch.exp(log_ratio)
    approx_kl = weighted_mean((ratio - 1.0) - log_ratio, weights)
    clip_fraction = weighted_mean(((ratio - 1.0).abs() > clip_coef).float(), weights)
    return approx_kl, clip_fraction


def value_loss(
    new_values: torch.Tensor,
    returns: torch.Tensor,
    old_values: torch.Tensor | None = None,
    clip_coef: float | None = None,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """``0.5 * mean((V - R)^2)``; with ``clip_coef`` and ``old_values``, PPO's clipped
    form ``0.5 * mean(max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2))`` (weighted:
    see the module docstring). Shapes: ``(B,)``; returns ``()``."""
    unclipped = (new_values - returns) ** 2
    if clip_coef is None:
        return 0.5 * weighted_mean(unclipped, weights)
    if old_values is None:
        raise ValueError("value_loss: clip_coef needs old_values")
    clipped_values = old_values + torch.clamp(new_values - old_values, -clip_coef, clip_coef)
    clipped = (clipped_values - returns) ** 2
    return 0.5 * weighted_mean(torch.max(unclipped, clipped), weights)


def entropy_bonus(entropy: torch.Tensor, weights: torch.Tensor | None = None
                  ) -> torch.Tensor:
    """Mean entropy over the batch (``(B,)`` -> ``()``); subtracted, times its
    coefficient, from the loss."""
    return weighted_mean(entropy, weights)


def ddpg_critic_target(
    rewards: torch.Tensor,
    next_q: torch.Tensor,
    terminated: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """TD target ``y = r + gamma * (1 - terminated) * Q'(s', mu'(s'))`` where ``s'`` is the
    true next observation (``final_obs`` at an episode end): truncated transitions
    bootstrap, terminated ones do not. Shapes ``(B,)``; no gradient flows through it."""
    return (rewards + gamma * (~terminated).to(rewards.dtype) * next_q).detach()


def ddpg_critic_loss(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``mean((Q(s, a) - y)^2)``; shapes ``(B,)`` -> ``()``."""
    return ((q - target) ** 2).mean()


def ddpg_actor_loss(q_of_actor: torch.Tensor) -> torch.Tensor:
    """``-mean(Q(s, mu(s)))``; shape ``(B,)`` -> ``()``."""
    return -q_of_actor.mean()


@torch.no_grad()
def soft_update(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    """Polyak averaging in place: ``theta' <- tau * theta + (1 - tau) * theta'``."""
    target_params = list(target.parameters())
    source_params = list(source.parameters())
    torch._foreach_mul_(target_params, 1.0 - tau)
    torch._foreach_add_(target_params, source_params, alpha=tau)
