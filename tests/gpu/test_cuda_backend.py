"""The CUDA backend's own behaviour: determinism, invalid actions, backend selection,
streams, the kernel cache, sizes that are not a multiple of the block."""

from __future__ import annotations

import pytest
import torch
from gymnasium.vector import AutoresetMode

import gpu_vecenv
from gpu_vecenv.actions import InvalidActionError
from gpu_vecenv.backends import resolve_backend
from gpu_vecenv.registration import make_vec

from .classic import CLASSIC_IDS, make_pair, random_actions

pytestmark = pytest.mark.gpu


def _trajectory(env_id: str, seed: int, steps: int = 1000, n: int = 4096):
    env = make_vec(env_id, n, device="cuda", backend="cuda")
    gen = torch.Generator(device="cuda").manual_seed(1)
    obs, _ = env.reset(seed=seed)
    frames = [obs]
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(random_actions(env, gen))
        frames.append(torch.cat([obs, reward[:, None], terminated[:, None],
                                 truncated[:, None]], dim=1))
    return frames


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_same_seed_is_bit_identical_and_other_seed_differs(env_id):
    a, b = _trajectory(env_id, 7), _trajectory(env_id, 7)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    c = _trajectory(env_id, 8, steps=1)
    assert not torch.equal(a[0], c[0])


def test_auto_picks_cuda_and_default_backend_is_cuda():
    assert resolve_backend("auto", torch.device("cuda", 0)) == "cuda"
    env = gpu_vecenv.make_vec("GPUCartPole-v1", 8)
    assert env.backend_name == "cuda" and env.device.type == "cuda"


def test_backend_selection_errors(monkeypatch):
    with pytest.raises(RuntimeError, match="not a CUDA device"):
        make_vec("GPUCartPole-v1", 4, device="cpu", backend="cuda")
    import gpu_vecenv.backends as backends

    real_find_spec = backends.importlib.util.find_spec
    monkeypatch.setattr(backends.importlib.util, "find_spec",
                        lambda name: None if name == "pycuda" else real_find_spec(name))
    with pytest.raises(RuntimeError, match="PyCUDA"):
        make_vec("GPUCartPole-v1", 4, device="cuda", backend="cuda")
    monkeypatch.undo()
    import gpu_vecenv.backends.compiler as compiler

    monkeypatch.setattr(compiler, "find_nvcc", lambda: None)
    monkeypatch.setattr(backends.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="nvcc"):
        make_vec("GPUCartPole-v1", 4, device="cuda", backend="cuda")


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_invalid_action_strict_raises_and_changes_nothing(env_id):
    env = make_vec(env_id, 1000, device="cuda", backend="cuda", strict=True)
    env.reset(seed=3)
    gen = torch.Generator(device="cuda").manual_seed(2)
    env.step(random_actions(env, gen))
    before = env.get_state()
    bad = random_actions(env, gen)
    bad[417] = -1 if env.actions.kind == "discrete" else float("nan")
    with pytest.raises(InvalidActionError, match="417"):
        env.step(bad)
    after = env.get_state()
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_invalid_action_deferred_leaves_env_intact_and_is_reported(env_id):
    cuda_env, ref = make_pair(env_id, 1000)
    for env in (cuda_env, ref):
        env.reset(seed=3)
    gen = torch.Generator(device="cuda").manual_seed(2)
    before = cuda_env.get_state()
    action = random_actions(cuda_env, gen)
    action[417] = 5 if cuda_env.actions.kind == "discrete" else float("inf")
    cuda_env.step(action)  # no sync, no raise here
    ref.step(action)
    after = cuda_env.get_state()
    for key in before:
        assert torch.equal(after[key][417], before[key][417]), key
        assert torch.equal(after[key], ref.get_state()[key]), key
    assert cuda_env.buffers.invalid_action.nonzero().flatten().tolist() == [417]
    with pytest.raises(InvalidActionError, match="417"):
        cuda_env.check_errors()
    cuda_env.check_errors()  # reported once


def test_side_stream_orders_like_the_default_stream():
    """On a non-default torch stream the kernel goes onto that stream (driver API): it
    must read the action before a later torch op on that stream overwrites it, and the
    obs must be complete before a later op reads it. Compared with the same env stepped
    on the default stream (same kernel, so bit-identical if ordered)."""
    n = 1_000_003
    on_side = make_vec("GPUCartPole-v1", n, device="cuda", backend="cuda", copy=False)
    on_default = make_vec("GPUCartPole-v1", n, device="cuda", backend="cuda", copy=False)
    gen = torch.Generator(device="cuda").manual_seed(0)
    actions = [random_actions(on_default, gen) for _ in range(20)]
    on_default.reset(seed=1)
    expected = [on_default.step(a)[0].clone() for a in actions]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    got = []
    with torch.cuda.stream(side):
        on_side.reset(seed=1)
        for a in actions:
            scratch = a.clone()
            obs = on_side.step(scratch)[0]
            scratch.fill_(7)  # invalid: if the kernel read it after this, envs would not step
            got.append(obs.clone())
    side.synchronize()
    assert all(torch.equal(x, y) for x, y in zip(got, expected, strict=True))
    assert int(on_side.buffers.error_count) == 0


@pytest.mark.parametrize("n", [1, 255, 257, 1000, 65_537])
def test_odd_sizes(n):
    cuda_env, ref = make_pair("GPUAcrobot-v1", n, AutoresetMode.SAME_STEP)
    gen = torch.Generator(device="cuda").manual_seed(n)
    a, _ = cuda_env.reset(seed=9)
    b, _ = ref.reset(seed=9)
    assert torch.equal(a, b)
    for _ in range(20):
        action = random_actions(ref, gen)
        assert torch.equal(cuda_env.step(action)[0], ref.step(action)[0])
