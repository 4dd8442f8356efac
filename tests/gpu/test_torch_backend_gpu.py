"""The torch backend on a GPU, where its draws are compacted with a host sync: the bits of
the frozen original backend over roll-outs (invalid actions, partial resets, reseeds),
dense draws (the CUDA-graph path) equal compact ones, the compiled step (and compiled
draws) equal eager ones, and a captured graph of torch-backend steps replays what the
eager steps do."""

from __future__ import annotations

import pytest
import torch
from gymnasium.vector import AutoresetMode
from torch._dynamo.utils import counters

from gpu_vecenv.backends import compiled_step
from gpu_vecenv.backends.torch_backend import TorchBackend
from gpu_vecenv.entry_points import make_vec
from tests.runtime.frozen_torch_backend import FrozenTorchBackend
from tests.runtime.test_fast_backend import ENVS, MODES, _pair, _run_pair

from .classic import CLASSIC_IDS, random_actions
from .test_graph_capture import STEPS_PER_GRAPH, _assert_graph_equals_eager

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("name", list(ENVS))
def test_backend_matches_the_frozen_backend_on_cuda(name, mode):
    new, old = _pair(ENVS[name], 4099, mode, limit=23, device="cuda")
    old.backend = FrozenTorchBackend(old._ctx)
    _run_pair(new, old, steps=200, seed=sum(map(ord, name)) + MODES.index(mode))


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("name", ["cartpole", "acrobot", "pendulum", "mixed"])
def test_dense_draws_equal_compact_draws_on_cuda(name, mode):
    compact, dense = _pair(ENVS[name], 3001, mode, limit=11, device="cuda")
    dense.backend._draws_for_all = lambda: True
    _run_pair(compact, dense, steps=100, seed=7)


COMPILED_CASES = [(name, AutoresetMode.NEXT_STEP) for name in ENVS] + [
    (name, mode) for name in ("cartpole", "pendulum", "mixed")
    for mode in (AutoresetMode.SAME_STEP, AutoresetMode.DISABLED)]


@pytest.mark.parametrize(("name", "mode"), COMPILED_CASES,
                         ids=[f"{n}-{m.name}" for n, m in COMPILED_CASES])
def test_compiled_step_equals_eager_on_cuda(name, mode):
    """``compile=True`` on a GPU compiles the whole step (inductor, eager numerics): every
    output and buffer keeps the eager bits, across invalid actions, partial resets and
    reseeds, and the step is one graph (a graph break would split it into slow pieces)."""
    eager, compiled = _pair(ENVS[name], 3001, mode, limit=9, device="cuda")
    compiled.backend = TorchBackend(compiled._ctx, compile=True)
    assert compiled.backend._compiled_step is not None
    counters.clear()
    _run_pair(compiled, eager, steps=80, seed=3 + MODES.index(mode))
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 1


@pytest.mark.parametrize("name", ["cartpole", "pendulum", "mountain_car"])
def test_compiled_draws_equal_eager_on_cuda(name, monkeypatch):
    """Where the whole step cannot be compiled with eager's bits (another torch, ROCm),
    ``compile=True`` compiles the Philox draws only."""
    monkeypatch.setattr(compiled_step, "whole_step_problem", lambda device: "forced")
    eager, compiled = _pair(ENVS[name], 3001, AutoresetMode.SAME_STEP, limit=9, device="cuda")
    compiled.backend = TorchBackend(compiled._ctx, compile=True)
    assert compiled.backend._compiled_step is None
    _run_pair(compiled, eager, steps=60, seed=3)


@pytest.mark.parametrize("torch_compile", [False, True])
@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_torch_backend_replayed_graph_equals_eager_steps(env_id, torch_compile):
    """Under capture the backend draws for every env (no sync); the replays must match
    eager steps, which draw only for the resetting envs."""
    envs = [make_vec(env_id, 3001, device="cuda", backend="torch", copy=False,
                     autoreset_mode=AutoresetMode.SAME_STEP, max_episode_steps=7,
                     torch_compile=torch_compile) for _ in range(2)]
    gen = torch.Generator(device="cuda").manual_seed(3)
    table = torch.stack([random_actions(envs[0], gen) for _ in range(STEPS_PER_GRAPH)])
    eager = _assert_graph_equals_eager(envs, table, seed=11)
    assert any(bool(f[..., envs[0].obs_dim + 2].any()) for f in eager)  # time limit hit


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("name", ["cartpole", "acrobot", "pendulum", "mixed", "box_counting"])
def test_graphed_steps_equal_eager_steps(name, mode):
    """``graphs=True``: three eager steps, then every step replays one captured graph;
    every output and buffer equals the eager backend's, across invalid actions, partial
    resets and reseeds between the replays (they run eagerly, outside the graph)."""
    graphed, eager = _pair(ENVS[name], 3001, mode, limit=13, device="cuda")
    graphed.backend = TorchBackend(graphed._ctx, graphs=True)
    _run_pair(graphed, eager, steps=120, seed=5)
    assert graphed.backend._graphed._graph is not None  # replays happened


@pytest.mark.parametrize("copy", [False, True])
def test_graphed_env_through_make_vec(copy):
    """Through ``make_vec(torch_graphs=True)``: with ``copy=True`` every step returns new
    tensors (the graph's outputs are copied out), with ``copy=False`` the env's own."""
    kw = dict(device="cuda", backend="torch", autoreset_mode=AutoresetMode.SAME_STEP,
              max_episode_steps=9, copy=copy)
    graphed = make_vec("GPUCartPole-v1", 2048, torch_graphs=True, torch_compile=True, **kw)
    eager = make_vec("GPUCartPole-v1", 2048, **kw)
    gen = torch.Generator(device="cuda").manual_seed(0)
    for env in (graphed, eager):
        env.reset(seed=3)
    kept = []
    for _ in range(30):
        action = random_actions(graphed, gen)
        a = graphed.step(action)
        b = eager.step(action)
        for x, y in zip(a[:4] + (a[4]["final_obs"],), b[:4] + (b[4]["final_obs"],),
                        strict=True):
            assert torch.equal(x, y)
        kept.append((a[0], a[0].clone()))
    if copy:  # earlier results untouched by later replays
        assert all(torch.equal(x, y) for x, y in kept)
