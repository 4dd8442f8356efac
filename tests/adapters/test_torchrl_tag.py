"""Multi-agent envs through TorchRL: agents grouped by role, one batch row per game."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import check_env_specs

import gpu_vecenv
from gpu_vecenv.adapters.torchrl import TorchRLMultiAgentEnv, TorchRLTagEnv
from tests.tag.makers import PREDATOR_PREY


@pytest.mark.parametrize("env_id", ["GPUTag-v0", "GPUTagGrid-v0"])
def test_check_env_specs_and_team_shapes(env_id):
    env = TorchRLTagEnv(env_id, num_games=3, device="cpu")
    check_env_specs(env, seed=0)
    roles = env.env.roles
    taggers, runners = roles.count("tagger"), roles.count("runner")
    td = env.reset()
    obs_dim = env.env.single_observation_space.shape[0]
    assert td["tagger", "observation"].shape == (3, taggers, obs_dim)
    assert td["runner", "observation"].shape == (3, runners, obs_dim)
    assert td["runner", "active"].all()
    action = env.full_action_spec.rand()
    assert action["tagger", "action"].shape[:2] == (3, taggers)
    out = env.step(td.update(action))
    assert out["next", "tagger", "reward"].shape == (3, taggers, 1)
    assert out["next", "runner", "reward"].shape == (3, runners, 1)
    assert out["next", "done"].shape == (3, 1)


def test_team_views_match_the_slot_view():
    env = TorchRLTagEnv("GPUTag-v0", num_games=2, device="cpu")
    td = env.reset()
    slot_obs = env.env.set_state({})  # the current observations, in slot order
    per_game = slot_obs.view(2, env.env.num_agents, -1)
    roles = env.env.roles
    tagger_slots = [i for i, r in enumerate(roles) if r == "tagger"]
    runner_slots = [i for i, r in enumerate(roles) if r == "runner"]
    assert torch.equal(td["tagger", "observation"], per_game[:, tagger_slots])
    assert torch.equal(td["runner", "observation"], per_game[:, runner_slots])


def test_actions_reach_their_agents():
    env = TorchRLTagEnv("GPUTagGrid-v0", num_games=2, device="cpu")
    env.reset()
    seen = {}
    original = env.env.step

    def recording_step(actions):
        seen["actions"] = actions.clone()
        return original(actions)

    env.env.step = recording_step
    td = env.reset()
    tagger_action = torch.full(td["tagger", "observation"].shape[:2], 3, dtype=torch.int64)
    runner_action = torch.full(td["runner", "observation"].shape[:2], 1, dtype=torch.int64)
    td["tagger", "action"] = tagger_action
    td["runner", "action"] = runner_action
    env.step(td)
    roles = env.env.roles
    expected = torch.tensor([3 if r == "tagger" else 1 for r in roles]).repeat(2)
    assert torch.equal(seen["actions"], expected)


def test_rollout_resets_finished_games_only():
    env = TorchRLTagEnv("GPUTag-v0", num_games=4, device="cpu", episode_length=10)
    env.set_seed(0)
    torch.manual_seed(0)
    td = env.rollout(35, break_when_any_done=False)
    done = td["next", "done"].squeeze(-1)
    assert bool(done.any(dim=1).all())  # every game ended (time limit 10)
    truncated = td["next", "truncated"].squeeze(-1)
    assert torch.equal(done & ~td["next", "terminated"].squeeze(-1), truncated)
    # after a game ends, TorchRL resets it: every agent is active again
    after = td["runner", "active"][:, 1:][done[:, :-1]]
    assert bool(after.all())


def test_partial_reset_of_games():
    env = TorchRLTagEnv("GPUTag-v0", num_games=3, device="cpu")
    td = env.reset()
    td.update(env.full_action_spec.rand())
    stepped = env.step(td)["next"]
    mask = torch.tensor([[False], [True], [False]])
    out = env._reset(TensorDict({"_reset": mask}, batch_size=[3]))
    for team in ("tagger", "runner"):
        assert torch.equal(out[team, "observation"][[0, 2]],
                           stepped[team, "observation"][[0, 2]])
        assert not torch.equal(out[team, "observation"][1], stepped[team, "observation"][1])


def test_groups_are_the_envs_own_roles():
    gpu_vecenv.register("PredatorPrey-v0", PREDATOR_PREY, kwargs={"num_taggers": 2})
    env = TorchRLMultiAgentEnv("PredatorPrey-v0", num_games=3, device="cpu")
    check_env_specs(env, seed=0)
    assert list(env.groups) == ["predator", "prey"]
    td = env.reset()
    obs_dim = env.env.single_observation_space.shape[0]
    assert td["predator", "observation"].shape == (3, 2, obs_dim)
    assert td["prey", "observation"].shape == (3, 1, obs_dim)
    out = env.step(td.update(env.full_action_spec.rand()))
    assert out["next", "prey", "reward"].shape == (3, 1, 1)
    assert TorchRLTagEnv is TorchRLMultiAgentEnv  # the documented earlier name


def test_a_single_agent_id_is_refused():
    with pytest.raises(TypeError, match="single-agent env; use TorchRLEnv"):
        TorchRLMultiAgentEnv("GPUCartPole-v1", num_games=2, device="cpu")
