"""The torch backend gives the bits of its original, slow form (frozen in
``frozen_torch_backend.py``): every output and buffer, every step, for every classic env,
all three autoreset modes, per-env seeds, invalid actions and partial resets. Also: the
stacked-lane Philox equals the original one on arbitrary inputs, the dense draw path
(used while a CUDA graph is captured) equals the compact one, and ``compile=True``
equals eager.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv import seeding
from gpu_vecenv.backends.torch_backend import TorchBackend
from gpu_vecenv.definition import EnvDefinition, StateField
from gpu_vecenv.env_ids import load_definition, shipped_ids
from gpu_vecenv.envs import cartpole
from gpu_vecenv.reset_arguments import reseed
from gpu_vecenv.vector_env import GpuVectorEnv
from tests.runtime import frozen_torch_backend as frozen
from tests.runtime.counting_env import BOX_COUNTING, CountingParams

CLASSIC = {d.name: d for d in map(load_definition, shipped_ids(single_agent=True))}
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


def _mixed_step(params, state, action):
    count = (state["count"] + 1 + action).to(torch.int32)
    x = state["x"] * 0.5 + action.to(torch.float32)
    return {"x": x, "count": count, "y": state["y"] + 1.0}, x * 2, count >= 5


MIXED = EnvDefinition(  # state fields of two dtypes: two state blocks
    name="mixed", params_type=CountingParams,
    state_fields=(StateField("x"), StateField("count", torch.int32), StateField("y")),
    observation_space=lambda p: gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
    action_space=lambda p: gym.spaces.Discrete(3),
    num_reset_draws=lambda p: 6,
    reset=lambda p, u: {"x": u[:, 0] - u[:, 5], "count": (u[:, 1] * 3).to(torch.int32),
                        "y": u[:, 2] * u[:, 4]},
    step=_mixed_step,
    observe=lambda p, s: torch.stack([s["x"], s["count"].to(torch.float32), s["y"]], -1),
    max_episode_steps=9,
)
ENVS = {**CLASSIC, "mixed": MIXED, "box_counting": BOX_COUNTING}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Floats as their bit patterns, so NaN == NaN and -0.0 != 0.0."""
    return t.view(torch.int32) if t.dtype == torch.float32 else t


STEP_OUTPUTS = ("obs", "reward", "terminated", "truncated", "final_obs")


def _assert_same(a: GpuVectorEnv, b: GpuVectorEnv, what: str,
                 outputs: tuple[str, ...] = STEP_OUTPUTS) -> None:
    """Every output in ``outputs`` and every buffer hold the same bits in ``a`` and ``b``."""
    outs = [(name, getattr(a._outputs, name), getattr(b._outputs, name)) for name in outputs]
    buf_a, buf_b = a.buffers, b.buffers
    outs += [(f"state {k}", v, buf_b.state[k]) for k, v in buf_a.state.items()]
    outs += [(name, getattr(buf_a, name), getattr(buf_b, name))
             for name in ("elapsed", "rng_counter", "seed", "autoreset_pending",
                          "invalid_action", "error_count")]
    for name, x, y in outs:
        if x is not None:
            assert torch.equal(_bits(x), _bits(y)), f"{what}: {name} differs"


def _actions(env: GpuVectorEnv, gen: torch.Generator, invalid: float) -> torch.Tensor:
    """Random actions, a fraction ``invalid`` of them out of range / NaN / inf."""
    n, space = env.num_envs, env.single_action_space
    bad = torch.rand(n, generator=gen) < invalid
    if env.actions.kind == "discrete":
        action = torch.randint(0, int(space.n), (n,), generator=gen)
        junk = torch.tensor([-1, int(space.n), 2**40])[torch.randint(0, 3, (n,), generator=gen)]
        return torch.where(bad, junk, action)
    action = (torch.rand((n, *space.shape), generator=gen) * 2 - 1) * 1.5 * float(space.high.max())
    junk = torch.tensor([float("nan"), float("inf"), -float("inf")])
    action[:, 0] = torch.where(bad, junk[torch.randint(0, 3, (n,), generator=gen)], action[:, 0])
    return action


def _pair(definition, n, mode, limit, device="cpu"):
    """The same env twice, on the torch backend (tests swap the second one's backend)."""
    return [GpuVectorEnv(definition, n, device=device, backend="torch", autoreset_mode=mode,
                         max_episode_steps=limit, strict=False, copy=False) for _ in range(2)]


def _run_pair(new: GpuVectorEnv, other: GpuVectorEnv, steps: int, seed: int,
              invalid: float = 0.1, resets: bool = True) -> None:
    """Drive both envs' backends with the same actions, resets and reseeds; compare all.
    Random numbers come from a CPU generator, so every device sees the same roll-out."""
    gen = torch.Generator().manual_seed(seed)
    n, device = new.num_envs, new.device
    seeds = [0, 2**64 - 1, 2**63, 2**32 - 1, 2**32] + [int(s) for s in
                                                       torch.randint(0, 2**62, (n,), generator=gen)]
    for env in (new, other):
        env.reset(seed=seeds[:n])
    # Desynchronize episodes and use counters beyond 32 bits (the draw uses the low word).
    elapsed = torch.randint(0, new.max_episode_steps or 50, (n,), generator=gen, dtype=torch.int32)
    counters = torch.randint(0, 2**40, (n,), generator=gen)
    pending = torch.rand(n, generator=gen) < 0.2
    for env in (new, other):
        env.set_state({"elapsed_steps": elapsed, "rng_counter": counters,
                       "autoreset_pending": pending})
    _assert_same(new, other, "after reset", outputs=("obs",))
    for t in range(steps):
        action = _actions(new, gen, invalid).to(device)
        for env in (new, other):
            env.backend.step(new.actions.convert(action), env._outputs)
        _assert_same(new, other, f"step {t}")
        if resets and t % 7 == 3:
            mask = (torch.rand(n, generator=gen) < 0.3).to(device)
            fresh = torch.randint(-(2**63), 2**63 - 1, (n,), generator=gen).to(device)
            for env in (new, other):
                b = env.buffers
                if t % 21 == 3:  # reseed some envs, as reset(seed=[...], options=mask) does
                    reseed(b.seed, b.rng_counter, fresh, mask)
                env.backend.reset(None if t % 35 == 10 else mask, env._outputs.obs)
            _assert_same(new, other, f"reset after step {t}", outputs=("obs",))


@pytest.fixture(params=["host", "torch"])
def draws(request, monkeypatch):
    """Small CPU draws run on Python ints; "torch" makes every draw use torch ops, as on
    a GPU."""
    if request.param == "torch":
        monkeypatch.setattr(seeding, "HOST_DRAW_BLOCKS", 0)
    return request.param


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("name", list(ENVS))
def test_backend_matches_the_frozen_backend(name, mode, draws):
    # Short limits so that every env truncates and resets many times.
    new, old = _pair(ENVS[name], 37, mode, limit=23)
    old.backend = frozen.FrozenTorchBackend(old._ctx)
    _run_pair(new, old, steps=200, seed=sum(map(ord, name)) + MODES.index(mode))


@pytest.mark.parametrize("n", [1, 5])
def test_backend_matches_the_frozen_backend_long_cartpole(n):
    """Gymnasium's own limit, valid actions only: long episodes, resets one env at a time."""
    new, old = _pair(CLASSIC["cartpole"], n, AutoresetMode.NEXT_STEP, limit=500)
    old.backend = frozen.FrozenTorchBackend(old._ctx)
    _run_pair(new, old, steps=1500, seed=n, invalid=0.0, resets=False)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("name", [*CLASSIC, "mixed"])
def test_dense_draws_equal_compact_draws(name, mode, monkeypatch):
    """While a CUDA graph is captured every env draws and ``where`` selects; that path
    (forced here on the CPU) must give the bits of drawing only for the resetting envs."""
    monkeypatch.setattr(seeding, "HOST_DRAW_BLOCKS", 0)  # torch ops, as on a GPU
    compact, dense = _pair(ENVS[name], 29, mode, limit=11)
    dense.backend._draws_for_all = lambda: True
    _run_pair(compact, dense, steps=120, seed=7)


@pytest.mark.parametrize("name", ["cartpole", "pendulum", "mountain_car"])
def test_compiled_draws_equal_eager(name):
    """``torch_compile=True`` (a compiled Philox) gives the eager bits."""
    eager, compiled = _pair(CLASSIC[name], 300, AutoresetMode.SAME_STEP, limit=9)
    compiled.backend = TorchBackend(compiled._ctx, compile=True)
    _run_pair(compiled, eager, steps=60, seed=3)


def test_philox_equals_the_frozen_philox_on_arbitrary_words():
    gen = torch.Generator().manual_seed(0)
    edge = torch.tensor([0, 1, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1])
    counter = [torch.cat([edge, torch.randint(0, 2**32, (4000,), generator=gen)])
               [torch.randperm(4006, generator=gen)] for _ in range(4)]
    key = [torch.cat([edge, torch.randint(0, 2**32, (4000,), generator=gen)])
           [torch.randperm(4006, generator=gen)] for _ in range(2)]
    got = seeding.philox4x32(tuple(counter), tuple(key))
    want = frozen.philox4x32(tuple(counter), tuple(key))
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)
    for i in range(0, 4006, 97):  # the textbook form on Python ints
        ints = seeding.philox4x32_ints(tuple(int(c[i]) for c in counter),
                                       tuple(int(k[i]) for k in key))
        assert list(ints) == [int(w[i]) for w in want]
    # Broadcasting and int keys, as before.
    got = seeding.philox4x32((counter[0][:, None], counter[1][:5], torch.tensor(3),
                              torch.tensor(0)), (7, 2**32 - 1))
    want = frozen.philox4x32((counter[0][:, None], counter[1][:5], torch.tensor(3),
                              torch.tensor(0)), (7, 2**32 - 1))
    for g, w in zip(got, want, strict=True):
        assert g.shape == (4006, 5) and torch.equal(g, w)


@pytest.mark.parametrize("n", [1, 7, 500])  # small draws run on Python ints (HOST_DRAW_BLOCKS)
@pytest.mark.parametrize("num_words", [1, 2, 3, 4, 5, 8, 13])
def test_random_words_equal_the_frozen_ones(num_words, n):
    gen = torch.Generator().manual_seed(num_words * 1000 + n)
    seed = torch.randint(-(2**63), 2**63 - 1, (n,), generator=gen)
    index = torch.randint(0, 2**31, (n,), generator=gen)
    counter = torch.randint(0, 2**45, (n,), generator=gen)
    for stream in (0, 1, 2**32 - 1):
        got = seeding.random_words(seed, index, counter, num_words, stream)
        want = frozen.random_words(seed, index, counter, num_words, stream)
        assert got.shape == (n, num_words) and torch.equal(got, want)
        assert torch.equal(_bits(seeding.random_uniform(seed, index, counter, num_words, stream)),
                           _bits(frozen.random_uniform(seed, index, counter, num_words, stream)))
    # Both ways of drawing, whatever the size.
    constants = seeding._device_constants(seed.device)
    assert torch.equal(seeding._words(seed, index, counter, num_words, 5, constants),
                       seeding._words_from_ints(seed, index, counter, num_words, 5))
    compiled = seeding.compiled_random_uniform(seed, index, counter, num_words)
    assert torch.equal(_bits(compiled), _bits(frozen.random_uniform(seed, index, counter,
                                                                    num_words)))


def test_uniform_scaling_equals_the_frozen_one():
    u = torch.cat([torch.tensor([0.0, 1 - 2**-24, 0.5]), torch.rand(10000)])
    for low, high in [(-0.05, 0.05), (-np.pi, np.pi), (-1.0, 1.0), (-0.6, -0.4), (0.1, 3.7)]:
        assert torch.equal(_bits(seeding.uniform(u, low, high)),
                           _bits(frozen.uniform(u, low, high)))


def test_torch_graphs_is_accepted_and_ignored_off_cuda():
    env = GpuVectorEnv(cartpole.DEFINITION, 8, device="cpu", backend="torch",
                       torch_graphs=True, torch_compile=False)
    assert env.torch_graphs and env.backend._graphed is None
    env.reset(seed=0)
    env.step(torch.zeros(8, dtype=torch.int64))
