"""The fused PPO kernels (``gpu_vecenv.train.ppo_mlp_kernels``) against the torch path (``-m gpu``).

Each kernel is tied to the computation it replaces: the minibatch gradient and statistics
to autograd through :func:`gpu_vecenv.train.ppo.ppo_minibatch_loss`, clipping to
``clip_grad_norm_``, sampling to :mod:`gpu_vecenv.train.distributions` with the same
noise, values to ``ActorCritic.value`` and GAE to :func:`losses.gae_advantages` (equal bit
for bit: same float operations). Sums run in another order than cuBLAS's, so gradients
agree to float rounding. On GPUs with TF32 tensor cores the hidden layers' products run
there: in three TF32 products by default (float32's accuracy, the same tolerances as the
float32 FMAs), in one with ``mma=1`` (TF32's accuracy, checked by relative error).
"""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from gpu_vecenv.train import losses
from gpu_vecenv.train.config import PPOConfig
from gpu_vecenv.train.distributions import ActionSpec, log_prob_and_entropy
from gpu_vecenv.train.networks import ActorCritic
from gpu_vecenv.train.ppo import ppo_minibatch_loss
from gpu_vecenv.train.ppo_mlp_kernels import FusedPPO, kernel_parameter_order

# a hang (a kernel, the compiler) fails the test after 300 s (tests/conftest.py)
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("hard_time_limit")]

CASES = {
    # space, obs_dim, hidden, activation, normalize_obs, PPO settings
    "discrete-tanh": (gym.spaces.Discrete(2), 4, (64, 64), "tanh", False,
                      {"ent_coef": 0.01}),
    "multidiscrete-relu-start": (gym.spaces.MultiDiscrete([3, 4], start=[-1, 2]), 7,
                                 (32, 16, 8), "relu", True,
                                 {"ent_coef": 0.05, "clip_vloss": False}),
    "box-elu": (gym.spaces.Box(-2.0, 2.0, (2,), np.float32), 3, (48,), "elu", True,
                {"norm_adv": False, "clip_coef": 0.1}),
    "box-unbounded-4-layers": (gym.spaces.Box(-np.inf, np.inf, (3,), np.float32), 5,
                               (16, 24, 16, 8), "tanh", False,
                               {"ent_coef": 0.02, "vf_coef": 1.3}),
    # Tag's observation and action sizes: only tiles of 32 samples fit in shared memory.
    "tag-sized-tile-32": (gym.spaces.MultiDiscrete([21, 21]), 72, (64, 64), "tanh", False,
                          {"ent_coef": 0.01}),
}


def _build(case: str, seed: int = 0, tile: int | None = None, mma: int | None = None):
    space, obs_dim, hidden, activation, normalize, ppo = CASES[case]
    spec = ActionSpec.from_space(space)
    torch.manual_seed(seed)
    model = ActorCritic(obs_dim, spec, hidden, activation, -0.5, normalize).cuda()
    if normalize:
        model.normalizer.mean.normal_()
        model.normalizer.var.uniform_(0.3, 3.0)
    reference = copy.deepcopy(model)
    fused = FusedPPO(model, spec, obs_dim, hidden, activation, normalize, tile, mma)
    config = PPOConfig(hidden_sizes=hidden, activation=activation, **ppo)
    return spec, model, reference, fused, config


def _flat(fused: FusedPPO, tensors) -> torch.Tensor:
    """Tensors laid out like the fused flat buffer (zeros in the padding)."""
    flat = torch.zeros_like(fused.flat_params)
    for t, offset in zip(tensors, fused.offsets, strict=True):
        flat[offset:offset + t.numel()] = t.reshape(-1)
    return flat


def _rollout(spec, reference, rows: int, obs_dim: int):
    """Observations, actions sampled from the policy, perturbed old log-probs/values."""
    g = torch.Generator(device="cuda").manual_seed(1)
    obs = torch.randn(rows, obs_dim, device="cuda", generator=g) * 2
    with torch.no_grad():
        action, log_prob = reference.act(obs, g)
        values = reference.value(obs)
    shift = torch.randn(rows, device="cuda", generator=g) * 0.3
    return {"obs": obs, "actions": action.contiguous(), "log_probs": log_prob + shift,
            "advantages": torch.randn(rows, device="cuda", generator=g) * 3 + 0.5,
            "returns": torch.randn(rows, device="cuda", generator=g),
            "values": values + torch.randn(rows, device="cuda", generator=g) * 0.3}


# Each case with the largest tile that fits, two with the smaller tile forced and two
# with tiles of 128 (more samples than the block has threads).
TILE_CASES = [(case, None) for case in CASES] + [("discrete-tanh", 32), ("box-elu", 32),
                                                 ("discrete-tanh", 128),
                                                 ("multidiscrete-relu-start", 128)]
# The products as float32 FMAs on every GPU (mma=0) and one TF32 product (mma=1), for the
# cases whose hidden layers run on tensor cores otherwise.
MMA_CASES = [(case, tile, mma) for mma in (0, 1) for case, tile in
             [("discrete-tanh", None), ("multidiscrete-relu-start", None),
              ("tag-sized-tile-32", None)]]


def _tf32_tensor_cores() -> bool:
    return torch.cuda.get_device_capability() >= (8, 0)


def test_the_hidden_products_run_as_the_matmul_precision_asks():
    """Three TF32 products under "highest" (the default), one under "high", FMAs with
    mma=0 or on a GPU without TF32 tensor cores (the kernel reports what it compiled)."""
    cores = _tf32_tensor_cores()
    assert _build("discrete-tanh")[3].mma_precision == (3 if cores else 0)
    torch.set_float32_matmul_precision("high")  # the conftest fixture restores it
    assert _build("discrete-tanh")[3].mma_precision == (1 if cores else 0)
    assert _build("discrete-tanh", mma=0)[3].mma_precision == 0
    with pytest.raises(ValueError, match="mma is 0"):
        _build("discrete-tanh", mma=2)


def test_the_largest_tile_that_fits_is_chosen():
    assert _build("discrete-tanh")[3].tile == 64
    assert _build("tag-sized-tile-32")[3].tile == 32
    with pytest.raises(ValueError, match="tiles of 16 samples"):
        _build("discrete-tanh", tile=16)


GRADIENT_CASES = [(c, t, None) for c, t in TILE_CASES] + MMA_CASES


@pytest.mark.parametrize("case, tile, mma", GRADIENT_CASES,
                         ids=[f"{c}-tile-{t or 'auto'}" + (f"-mma-{m}" if m is not None else "")
                              for c, t, m in GRADIENT_CASES])
@pytest.mark.parametrize("rows, start, size", [(300, 20, 250), (4096, 0, 4096)],
                         ids=["partial-tile", "full-tiles"])
def test_minibatch_gradient_and_statistics_match_autograd(case, tile, mma, rows, start, size):
    spec, model, reference, fused, c = _build(case, tile=tile, mma=mma)
    obs_dim = CASES[case][1]
    batch = _rollout(spec, reference, rows, obs_dim)
    order = torch.randperm(rows, device="cuda", generator=torch.Generator("cuda").manual_seed(2))
    idx = order[start:start + size]
    loss, stats = ppo_minibatch_loss(reference, c, batch["obs"][idx], batch["actions"][idx],
                                     batch["log_probs"][idx], batch["advantages"][idx],
                                     batch["returns"][idx], batch["values"][idx])
    loss.backward()
    expected = _flat(fused, [p.grad for p in kernel_parameter_order(reference)])

    adv_stats = torch.zeros(2, device="cuda")
    fused.advantage_stats(batch["advantages"], order[start:], size, 1, adv_stats)
    adv = batch["advantages"][idx]
    torch.testing.assert_close(adv_stats, torch.stack([adv.mean(), adv.std()]))
    fused.minibatch_gradient(batch, order, start, size, adv_stats, c.clip_coef, c.ent_coef,
                             c.vf_coef, c.clip_vloss, c.norm_adv)
    if fused.mma_precision == 1:
        # TF32 (10-bit mantissas): the gradient to ~1e-3 of its norm, the statistics to 1e-2
        error = (fused.flat_grads - expected).norm() / expected.norm()
        assert 1e-5 < float(error) < 5e-3  # and not float32's ~1e-7: TF32 ran
        torch.testing.assert_close(fused.totals, stats, rtol=1e-2, atol=1e-4)
        assert 0.0 < float(stats[5]) < 1.0
        return
    torch.testing.assert_close(fused.flat_grads, expected, rtol=2e-4, atol=2e-6)
    torch.testing.assert_close(fused.totals, stats, rtol=2e-4, atol=2e-6)
    assert 0.0 < float(stats[5]) < 1.0  # some samples clipped, some not: both branches ran
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=2e-4, atol=2e-6)  # views of the flat

    torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.05)
    fused.clip_gradient(0.05)
    clipped = _flat(fused, [p.grad for p in kernel_parameter_order(reference)])
    torch.testing.assert_close(fused.flat_grads, clipped, rtol=2e-4, atol=2e-7)


@pytest.mark.parametrize("case, tile", TILE_CASES,
                         ids=[f"{c}-tile-{t or 'auto'}" for c, t in TILE_CASES])
def test_act_samples_like_the_distributions_with_the_same_noise(case, tile):
    spec, model, reference, fused, _ = _build(case, tile=tile)
    n, obs_dim = 1000, CASES[case][1]
    obs = torch.randn(n, obs_dim, device="cuda") * 2
    box = spec.kind == "box"
    noise = (torch.randn if box else torch.rand)(n, spec.head_size, device="cuda")
    obs_out = torch.zeros_like(obs)
    shape = (n, *spec.action_shape)
    actions = torch.zeros(shape, dtype=spec.dtype, device="cuda")
    env_actions = torch.zeros_like(actions) if box else actions
    log_probs = torch.zeros(n, device="cuda")
    fused.act(obs, noise, obs_out, actions, log_probs, env_actions)

    with torch.no_grad():
        params = reference.actor(reference.normalizer(obs))
        if box:
            expected = params + noise * torch.exp(reference.log_std)
        else:
            parts, offset = [], 0
            tiny = torch.finfo(torch.float32).tiny
            for size in spec.nvec:
                u = noise[:, offset:offset + size].clamp(min=tiny)
                logits = params[:, offset:offset + size]
                parts.append(torch.argmax(logits - torch.log(-torch.log(u)), dim=-1))
                offset += size
            expected = torch.stack(parts, -1) + torch.tensor(spec.start, device="cuda")
            expected = expected.reshape(shape)
        expected_log_prob, _ = log_prob_and_entropy(spec, params, reference.log_std, expected)
    assert torch.equal(obs_out, obs)
    if box:
        torch.testing.assert_close(actions, expected, rtol=1e-5, atol=1e-5)
        low = torch.tensor(spec.low, device="cuda")
        high = torch.tensor(spec.high, device="cuda")
        bounded = all(math.isfinite(x) for x in spec.low + spec.high)
        torch.testing.assert_close(env_actions,
                                   torch.clamp(actions, low, high) if bounded else actions)
    else:
        assert torch.equal(actions, expected)
    torch.testing.assert_close(log_probs, expected_log_prob, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["discrete-tanh", "multidiscrete-relu-start", "tag-sized-tile-32"])
def test_values_match_the_critic(case):
    _, _, reference, fused, _ = _build(case)
    obs = torch.randn(777, CASES[case][1], device="cuda")
    out = torch.full((777,), float("nan"), device="cuda")
    fused.values(obs, out)
    with torch.no_grad():
        torch.testing.assert_close(out, reference.value(obs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mma", [0, 1])
def test_values_match_the_critic_with_fmas_or_one_tf32_product(mma):
    _, _, reference, fused, _ = _build("discrete-tanh", mma=mma)
    obs = torch.randn(777, CASES["discrete-tanh"][1], device="cuda")
    out = torch.full((777,), float("nan"), device="cuda")
    fused.values(obs, out)
    with torch.no_grad():
        expected = reference.value(obs)
    if fused.mma_precision == 1:
        error = (out - expected).norm() / expected.norm()
        assert 1e-6 < float(error) < 5e-3
    else:
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_gae_kernel_equals_the_torch_scan_bit_for_bit():
    _, _, _, fused, _ = _build("discrete-tanh")
    g = torch.Generator(device="cuda").manual_seed(5)
    t, n = 37, 1000
    rewards = torch.randn(t, n, device="cuda", generator=g)
    values = torch.randn(t, n, device="cuda", generator=g)
    next_values = torch.randn(t, n, device="cuda", generator=g)
    terminated = torch.rand(t, n, device="cuda", generator=g) < 0.05
    done = terminated | (torch.rand(t, n, device="cuda", generator=g) < 0.05)
    expected = losses.gae_advantages(rewards, values, next_values, terminated, done, 0.98, 0.9)
    advantages, returns = torch.empty_like(rewards), torch.empty_like(rewards)
    fused.gae(rewards, values, next_values, terminated, done, 0.98, 0.9, advantages, returns)
    assert torch.equal(advantages, expected[0]) and torch.equal(returns, expected[1])


@pytest.mark.parametrize("rows, size, count", [(7000, 2000, 3), (30000, 6000, 5),
                                               (100, 3, 4)])
def test_advantage_statistics_of_many_chunks_match_torch(rows, size, count):
    """advantage_stats sums chunks of 2,048 advantages and joins them (Chan's update):
    each minibatch's mean and unbiased std, against torch's over the same rows."""
    fused = _build("discrete-tanh")[3]
    g = torch.Generator(device="cuda").manual_seed(3)
    advantages = torch.randn(rows, device="cuda", generator=g) * 40 + 1000  # far from 0
    order = torch.randperm(rows, device="cuda", generator=g)
    out = torch.full((2 * count,), float("nan"), device="cuda")
    fused.advantage_stats(advantages, order, size, count, out)
    chosen = advantages[order[:count * size]].reshape(count, size)
    expected = torch.stack([chosen.double().mean(1), chosen.double().std(1)], 1).reshape(-1)
    torch.testing.assert_close(out.double(), expected, rtol=3e-5, atol=0)


def test_flat_parameters_survive_optimizer_steps_and_state_loads():
    _, model, reference, fused, _ = _build("box-elu")
    params = fused.parameters
    assert all(p.grad is not None for p in model.parameters())
    assert {id(p) for p in params} == {id(p) for p in model.parameters()}
    with torch.no_grad():
        params[0].add_(1.0)
    assert torch.equal(fused.flat_params[:params[0].numel()], params[0].reshape(-1))
    log_std_at = fused.offsets[-1]
    assert torch.equal(fused.flat_params[log_std_at:log_std_at + 2], model.log_std)
    model.load_state_dict(reference.state_dict())
    torch.testing.assert_close(fused.flat_params,
                               _flat(fused, kernel_parameter_order(reference)))
