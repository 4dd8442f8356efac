"""``load_policy(run_dir).predict(obs)``: SB3's shapes and types (numpy in, numpy out;
torch in, torch out; a batch or one observation), the run's networks' actions, Box
actions clipped, and Tag's slots each acted for by its agent's policy."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from gpu_vecenv.train import A2CConfig, DDPGConfig, PPOConfig, load_models, load_policy, train

QUIET = dict(device="cpu", backend="torch", progress=False, tensorboard=False,
             eval_episodes=0, seed=3)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("policies")
    small = dict(num_steps=8, hidden_sizes=[16])
    train("GPUCartPole-v1", PPOConfig(**small), num_envs=4, total_steps=32,
          run_dir=str(root / "cartpole"), **QUIET)
    train("GPUPendulum-v1", A2CConfig(**small), num_envs=4, total_steps=32,
          run_dir=str(root / "pendulum"), **QUIET)
    train("GPUPendulum-v1", DDPGConfig(hidden_sizes=[16], learning_starts=8, batch_size=8),
          num_envs=4, total_steps=32, run_dir=str(root / "ddpg"), **QUIET)
    train("GPUTag-v0", PPOConfig(num_steps=4, hidden_sizes=[16], num_minibatches=1),
          num_envs=1, total_steps=44,
          run_dir=str(root / "tag"), **QUIET)
    return root


def observations(env_id: str, n: int) -> torch.Tensor:
    env = gym.make_vec(env_id, device="cpu", **({"num_games": n} if "Tag" in env_id
                                                else {"num_envs": n}))
    obs, _ = env.reset(seed=0)
    for _ in range(3):
        obs = env.step(env.action_space.sample())[0]
    return obs


def test_numpy_in_numpy_out_torch_in_torch_out(runs):
    policy = load_policy(runs / "cartpole", device="cpu")
    _, models, step = load_models(runs / "cartpole", torch.device("cpu"))
    obs = observations("GPUCartPole-v1", 6)
    expected = models["default"].deterministic_action(obs)

    actions, state = policy.predict(obs.numpy(), deterministic=True)
    assert state is None and isinstance(actions, np.ndarray)
    assert actions.dtype == np.int64 and actions.shape == (6,)
    assert actions.tolist() == expected.tolist()
    one, _ = policy.predict(obs.numpy()[2], deterministic=True)  # one observation
    assert isinstance(one, np.ndarray) and one.shape == () and int(one) == int(expected[2])
    tensor, _ = policy.predict(obs, deterministic=True)
    assert isinstance(tensor, torch.Tensor) and tensor.device == obs.device
    assert torch.equal(tensor, expected)
    assert policy.predict(obs[2], deterministic=True)[0].shape == ()
    assert policy.predict(obs, state="kept")[1] == "kept"  # SB3 hands the state back
    assert policy.global_step == step == 32 and policy.names == ["default"]
    assert policy.action_space == gym.spaces.Discrete(2)


def test_sampling_is_seeded_and_in_the_space(runs):
    obs = observations("GPUCartPole-v1", 64).numpy()
    a = load_policy(runs / "cartpole", device="cpu", seed=7).predict(obs)[0]
    b = load_policy(runs / "cartpole", device="cpu", seed=7).predict(obs)[0]
    assert np.array_equal(a, b) and set(a.tolist()) <= {0, 1}


@pytest.mark.parametrize("run", ["pendulum", "ddpg"])
def test_box_actions_are_clipped_to_the_space(run, runs):
    policy = load_policy(runs / run, device="cpu")
    obs = observations("GPUPendulum-v1", 5)
    for deterministic in (True, False):
        actions, _ = policy.predict(obs.numpy(), deterministic=deterministic)
        assert actions.dtype == np.float32 and actions.shape == (5, 1)
        assert policy.action_space.contains(actions[0])
    # a network that asks for far more than the bounds gets the bounds, as in SB3
    last = policy.models["default"].actor[-1]
    with torch.no_grad():
        last.bias.fill_(100.0)
    assert policy.predict(obs, deterministic=True)[0].flatten().tolist() == [2.0] * 5


def test_tag_slots_are_acted_for_by_their_agents_policy(runs):
    policy = load_policy(runs / "tag", device="cpu")
    assert policy.names == ["tagger", "runner"]
    roles = gym.make_vec("GPUTag-v0", device="cpu").roles
    assert policy.agent_policies == list(roles)  # Tag's default: one policy per role
    obs = observations("GPUTag-v0", 3)  # 3 games x 11 agents
    actions, _ = policy.predict(obs, deterministic=True)
    assert actions.shape == (33, 2) and actions.dtype == torch.int64
    for slot in range(33):
        name = policy.agent_policies[slot % 11]
        expected = policy.models[name].deterministic_action(obs[slot:slot + 1])[0]
        assert torch.equal(actions[slot], expected), slot
    # one policy alone, for its agents' observations (one agent: e.g. a PettingZoo game)
    runner, _ = policy["runner"].predict(obs[-1].numpy(), deterministic=True)
    assert runner.shape == (2,) and runner.tolist() == actions[-1].tolist()


def test_bad_calls_are_clear_errors(runs):
    cartpole = load_policy(runs / "cartpole", device="cpu")
    env = gym.make_vec("GPUCartPole-v1", 2, device="cpu")
    with pytest.raises(ValueError, match=r"got a tuple \(obs, info\)"):
        cartpole.predict(env.reset(seed=0))
    with pytest.raises(ValueError, match=r"Unexpected observation shape \(2, 5\): use \(4,\)"):
        cartpole.predict(np.zeros((2, 5), np.float32))
    tag = load_policy(runs / "tag", device="cpu")
    obs = observations("GPUTag-v0", 1)
    with pytest.raises(ValueError, match="slot = game \\* 11 \\+ agent, got 1 rows"):
        tag.predict(obs[0])
    with pytest.raises(ValueError, match="got 5 rows"):
        tag.predict(obs[:5])
    with pytest.raises(KeyError, match="no policy 'seeker'.*'tagger', 'runner'"):
        tag["seeker"]
    with pytest.raises(FileNotFoundError):
        load_policy(runs / "nowhere")
