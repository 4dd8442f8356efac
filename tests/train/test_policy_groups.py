"""A policy's rows of the vector: the strided copy used where its agents are one range of
every game (Tag's roles) takes and writes the same rows as the indexed path."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import pytest
import torch

from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.policies import build_groups, join_actions, joint_actions

GAMES, ROLES = 3, ("tagger", "tagger", "runner", "runner", "runner")


def _env():
    """What build_groups reads of a multi-agent vector env: 3 games of 5 agents."""
    return SimpleNamespace(
        num_games=GAMES, roles=ROLES, num_envs=GAMES * len(ROLES),
        single_action_space=gym.spaces.MultiDiscrete([3, 4]),
        single_observation_space=gym.spaces.Box(-1.0, 1.0, (6,)))


def _groups(overrides: list[str]):
    config = load_config(None, ["trainer.env=GPUTag-v0", *overrides])
    return build_groups(config, _env(), torch.device("cpu"), torch.Generator())


@pytest.mark.parametrize("overrides, blocks", [
    ([], {"tagger": (5, 0, 2), "runner": (5, 2, 5)}),
    # agents 0 and 3 are not one range: the indexed path
    (["policies.a.agents=[0, 3]", "policies.b.agents=[1, 2, 4]"], {"a": None, "b": None}),
    (["policies.a.agents=[1, 2, 3]", "policies.b.agents=[0, 4]"], {"a": (5, 1, 4), "b": None}),
])
def test_select_and_put_match_the_indexed_rows(overrides, blocks):
    groups = _groups(overrides)
    assert {g.name: g.block for g in groups} == blocks
    n = GAMES * len(ROLES)
    obs = torch.randn(n, 6)
    flags = torch.rand(n) < 0.5
    joint = joint_actions(groups, n, torch.device("cpu"))
    actions = []
    for g in groups:
        for tensor in (obs, flags):
            selected = g.select(tensor)
            expected = tensor.index_select(0, g.slots)
            if g.block is None:
                assert selected.is_contiguous()
            else:  # a view of the vector's rows, (games, agents of the block, ...)
                assert selected.shape == (GAMES, g.block[2] - g.block[1], *tensor.shape[1:])
                assert selected.data_ptr() == tensor[g.block[1]].data_ptr()
            assert torch.equal(selected.reshape(expected.shape), expected)
        actions.append(torch.randint(0, 3, (g.slots.shape[0], 2)))
    expected = torch.zeros_like(joint)
    for g, a in zip(groups, actions, strict=True):
        expected.index_copy_(0, g.slots, a)
    assert torch.equal(join_actions(groups, actions, joint), expected)
    # every slot written once, by its policy
    owner = torch.full((n,), -1)
    for i, g in enumerate(groups):
        g.put(owner, torch.full((g.slots.shape[0],), i))
    assert (owner >= 0).all()
