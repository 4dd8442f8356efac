"""Env steps captured into CUDA graphs: a replayed graph must do exactly what the same
steps do eagerly (classic kernels and Tag), and invalid actions inside a graph are still
reported (by ``check_errors()`` after the replay)."""

from __future__ import annotations

import pytest
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.actions import InvalidActionError
from gpu_vecenv.entry_points import make_vec
from tests.tag.makers import make_tag

from .classic import CLASSIC_IDS, random_actions

pytestmark = pytest.mark.gpu

STEPS_PER_GRAPH = 5
REPLAYS = 4


def _run(env, actions_of_step, capture: bool) -> list[torch.Tensor]:
    """``REPLAYS`` x ``STEPS_PER_GRAPH`` steps; each step's action comes from a torch op
    (so the graph holds it too). Returns every step's outputs, cloned."""
    outputs = []

    def steps():
        frames = []
        for k in range(STEPS_PER_GRAPH):
            obs, reward, terminated, truncated, info = env.step(actions_of_step(k))
            frames.append(torch.cat([obs.reshape(obs.shape[0], -1), reward[:, None],
                                     terminated[:, None], truncated[:, None],
                                     info["final_obs"].reshape(obs.shape[0], -1)], dim=1))
        return torch.stack(frames)

    if not capture:
        for _ in range(REPLAYS):
            outputs.append(steps().clone())
        return outputs
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as torch advises
        outputs.append(steps().clone())
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = steps()
    for _ in range(REPLAYS - 1):
        graph.replay()
        outputs.append(static.clone())
    return outputs


def _assert_graph_equals_eager(envs, table: torch.Tensor, seed: int) -> list[torch.Tensor]:
    """Step ``envs[0]`` eagerly and ``envs[1]`` through a graph with the actions of
    ``table`` (one row per step of the graph); outputs and final states must be equal.
    Returns the eager outputs."""
    results = []
    for env, capture in zip(envs, (False, True), strict=True):
        env.reset(seed=seed)
        # a copy on the stream per step, so the captured graph recomputes the action
        results.append(_run(env, lambda k: table[k].clone(), capture))
    torch.cuda.synchronize()
    for eager, graphed in zip(*results, strict=True):
        assert torch.equal(eager, graphed)
    state = [env.get_state() for env in envs]
    for key in state[0]:
        assert torch.equal(state[0][key], state[1][key]), key
    return results[0]


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_replayed_graph_equals_eager_steps(env_id):
    n = 3001
    envs = [make_vec(env_id, n, device="cuda", backend="cuda", copy=False,
                     autoreset_mode=AutoresetMode.SAME_STEP, max_episode_steps=7)
            for _ in range(2)]
    gen = torch.Generator(device="cuda").manual_seed(3)
    table = torch.stack([random_actions(envs[0], gen) for _ in range(STEPS_PER_GRAPH)])
    eager = _assert_graph_equals_eager(envs, table, seed=11)
    truncated_column = envs[0].obs_dim + 2
    assert any(bool(f[..., truncated_column].any()) for f in eager)  # time limit hit


def test_tag_replayed_graph_equals_eager_steps():
    params = dict(num_taggers=3, num_runners=40, grid_length=8.0, episode_length=6)
    envs = [make_tag(64, device="cuda", backend="cuda", copy=False,
                     autoreset_mode=AutoresetMode.SAME_STEP, **params) for _ in range(2)]
    gen = torch.Generator(device="cuda").manual_seed(5)
    nvec = torch.as_tensor(envs[0].single_action_space.nvec, device="cuda")
    table = torch.stack([(torch.rand((envs[0].num_envs, nvec.numel()), device="cuda",
                                     generator=gen) * nvec).long()
                         for _ in range(STEPS_PER_GRAPH)])
    eager = _assert_graph_equals_eager(envs, table, seed=2)
    assert any(bool(f[..., envs[0].obs_dim + 2].any()) for f in eager)  # games timed out


def test_invalid_actions_inside_a_graph_are_reported_after_replay():
    env = make_vec("GPUCartPole-v1", 1000, device="cuda", backend="cuda", copy=False)
    env.reset(seed=0)
    action = torch.zeros(1000, dtype=torch.int64, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        env.step(action + 0)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(3):
            env.step(action + 0)
    env.check_errors()  # nothing invalid yet
    before = env.get_state()
    action[17] = 5  # out of range for Discrete(2): env 17 must stay frozen
    graph.replay()
    after = env.get_state()
    assert torch.equal(before["x"][17], after["x"][17])
    assert not torch.equal(before["x"], after["x"])
    with pytest.raises(InvalidActionError, match="17"):
        env.check_errors()
