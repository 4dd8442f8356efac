"""The Stable-Baselines3 adapter: VecEnv contract, SB3 wrappers on top, and PPO learning."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.vec_env import VecCheckNan, VecMonitor, VecNormalize

from gpu_vecenv import make_vec
from gpu_vecenv.adapters.sb3 import SB3VecEnv
from gpu_vecenv.wrappers import NormalizeObservation, RecordEpisodeStatistics

SPACES = [
    ("GPUCartPole-v1", gym.spaces.Discrete, (8,)),
    ("GPUMountainCarContinuous-v0", gym.spaces.Box, (8, 1)),
]


@pytest.mark.parametrize(("env_id", "space_type", "action_shape"), SPACES)
def test_reset_and_step_return_numpy_in_sb3_layout(env_id, space_type, action_shape):
    venv = SB3VecEnv(env_id, num_envs=8, device="cpu")
    assert isinstance(venv.action_space, space_type)
    venv.seed(0)
    obs = venv.reset()
    assert isinstance(obs, np.ndarray) and obs.dtype == np.float32
    assert obs.shape == (8, *venv.observation_space.shape)
    actions = np.stack([venv.action_space.sample() for _ in range(8)])
    assert actions.shape == action_shape
    obs, rewards, dones, infos = venv.step(actions)
    assert obs.shape == (8, *venv.observation_space.shape) and obs.dtype == np.float32
    assert rewards.shape == (8,) and rewards.dtype == np.float32
    assert dones.shape == (8,) and dones.dtype == np.bool_
    assert isinstance(infos, list) and len(infos) == 8 and all(isinstance(i, dict) for i in infos)


def test_outputs_equal_the_raw_env_and_terminal_observations_are_final_obs():
    raw = make_vec(
        "GPUCartPole-v1", 16, device="cpu", autoreset_mode="SAME_STEP", max_episode_steps=20
    )
    venv = SB3VecEnv("GPUCartPole-v1", num_envs=16, device="cpu", max_episode_steps=20)
    venv.seed(5)
    raw_obs, _ = raw.reset(seed=5)
    np.testing.assert_array_equal(venv.reset(), raw_obs.numpy())
    rng = np.random.default_rng(0)
    seen_terminated = seen_truncated = 0
    for _ in range(45):
        actions = rng.integers(0, 2, size=16)
        raw_obs, raw_rew, term, trunc, info = raw.step(actions)
        obs, rewards, dones, infos = venv.step(actions)
        np.testing.assert_array_equal(obs, raw_obs.numpy())
        np.testing.assert_array_equal(rewards, raw_rew.numpy())
        np.testing.assert_array_equal(dones, (term | trunc).numpy())
        for i in range(16):
            if dones[i]:
                np.testing.assert_array_equal(
                    infos[i]["terminal_observation"], info["final_obs"][i].numpy()
                )
                assert infos[i]["TimeLimit.truncated"] == bool(trunc[i] and not term[i])
                seen_terminated += bool(term[i])
                seen_truncated += bool(trunc[i] and not term[i])
            else:
                assert "terminal_observation" not in infos[i]
    assert seen_terminated > 0 and seen_truncated > 0


def test_multidiscrete_actions_reach_the_env():
    class Recorder:
        """A SAME_STEP vector env stand-in with a MultiDiscrete action space."""

        num_envs = 3
        device = torch.device("cpu")
        metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
        render_mode = None
        single_observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        single_action_space = gym.spaces.MultiDiscrete([3, 4])

        def reset(self, seed=None, options=None):
            return torch.zeros(3, 2), {}

        def step(self, actions):
            self.actions = actions
            zeros = torch.zeros(3, dtype=torch.bool)
            return (
                torch.ones(3, 2),
                torch.ones(3),
                zeros,
                zeros,
                {"final_obs": torch.ones(3, 2), "_final_obs": zeros},
            )

    inner = Recorder()
    venv = SB3VecEnv(inner)
    venv.reset()
    actions = np.array([[0, 1], [2, 3], [1, 0]])
    venv.step(actions)
    assert inner.actions.dtype == torch.int64 and inner.actions.tolist() == actions.tolist()


def test_seed_applies_to_the_next_reset_only():
    venv = SB3VecEnv("GPUCartPole-v1", num_envs=4, device="cpu")
    assert venv.seed(3) == [3, 3, 3, 3]
    first = venv.reset()
    second = venv.reset()  # continues the streams: different starts
    venv.seed(3)
    np.testing.assert_array_equal(venv.reset(), first)
    assert not np.array_equal(first, second)


def test_attributes_methods_wrappers_and_options():
    venv = SB3VecEnv("GPUCartPole-v1", num_envs=4, device="cpu", render_mode="rgb_array")
    assert venv.get_attr("render_mode") == ["rgb_array"] * 4
    assert venv.get_attr("num_envs", indices=[1, 2]) == [4, 4]
    venv.set_attr("strict", True)
    assert venv.env.strict is True
    with pytest.raises(ValueError, match="indices must be None or all"):
        venv.set_attr("strict", False, indices=[0])
    assert venv.env_method("check_errors", indices=0) == [None]
    assert venv.env_is_wrapped(gym.wrappers.TimeLimit) == [False] * 4
    venv.reset()
    venv.step(np.zeros(4, dtype=np.int64))
    state = venv.env_method("get_state")[0]
    assert state["x"].shape == (4,)
    image = venv.render()
    assert image.ndim == 3 and image.shape[2] == 3 and image.dtype == np.uint8
    # options reach the next reset once: reset only env 1
    before = venv.step(np.zeros(4, dtype=np.int64))[0]
    venv.set_options({"reset_mask": np.array([False, True, False, False])})
    after = venv.reset()
    np.testing.assert_array_equal(after[[0, 2, 3]], before[[0, 2, 3]])
    assert not np.array_equal(after[1], before[1])
    assert venv._next_options == {}
    venv.close()
    assert venv.env.closed


def sb3_steps(venv: SB3VecEnv, steps: int, seed: int = 5) -> list:
    """Everything SB3 sees over ``steps`` random steps (seeded)."""
    venv.seed(seed)
    seen = [venv.reset()]
    rng = np.random.default_rng(0)
    space = venv.action_space  # Discrete or MultiDiscrete
    high = space.n if isinstance(space, gym.spaces.Discrete) else space.nvec
    for _ in range(steps):
        seen.append(venv.step(rng.integers(0, high, size=(venv.num_envs, *space.shape))))
    return seen


def assert_same_steps(ours: list, expected: list) -> None:
    np.testing.assert_array_equal(ours[0], expected[0])
    for (obs, rew, done, infos), (obs_e, rew_e, done_e, infos_e) in zip(
        ours[1:], expected[1:], strict=True
    ):
        np.testing.assert_array_equal(obs, obs_e)
        np.testing.assert_array_equal(rew, rew_e)
        np.testing.assert_array_equal(done, done_e)
        for info, info_e in zip(infos, infos_e, strict=True):
            assert sorted(info) == sorted(info_e)
            if "terminal_observation" in info:
                np.testing.assert_array_equal(
                    info["terminal_observation"], info_e["terminal_observation"]
                )
                assert info["TimeLimit.truncated"] == info_e["TimeLimit.truncated"]


@pytest.mark.parametrize("mode", ["NEXT_STEP", "DISABLED"])
def test_any_autoreset_mode_gives_sb3_what_same_step_gives(mode):
    # Episodes end by termination and by the 20-step limit; SB3 must see the same
    # obs (next episode's first), rewards, dones and terminal observations.
    kwargs = {"device": "cpu", "max_episode_steps": 20}
    expected = sb3_steps(SB3VecEnv("GPUCartPole-v1", num_envs=16, **kwargs), 45)
    env = make_vec("GPUCartPole-v1", 16, autoreset_mode=mode, **kwargs)
    ours = sb3_steps(SB3VecEnv(env), 45)
    assert_same_steps(ours, expected)
    dones = np.stack([step[2] for step in ours[1:]])
    truncated = [i["TimeLimit.truncated"] for s in ours[1:] for i in s[3] if i]
    assert dones.sum() > 16 and any(truncated) and not all(truncated)


def test_tag_in_next_step_mode_gives_sb3_what_same_step_gives():
    # a tagged runner's slot idles (zero obs) until its game ends, in both modes
    kwargs = {"device": "cpu", "episode_length": 20}
    expected = sb3_steps(SB3VecEnv("GPUTag-v0", num_envs=2, **kwargs), 45)
    env = make_vec("GPUTag-v0", 2, autoreset_mode="NEXT_STEP", **kwargs)
    assert_same_steps(sb3_steps(SB3VecEnv(env), 45), expected)


def test_an_env_as_gymnasium_makes_it_trains_with_ppo():
    # the call: gymnasium.make_vec's default autoreset mode is NEXT_STEP
    env = gym.make_vec("GPUCartPole-v1", num_envs=8, device="cpu")
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    venv = VecMonitor(SB3VecEnv(env))
    venv.seed(0)
    model = PPO(
        "MlpPolicy", venv, n_steps=64, batch_size=128, n_epochs=2, seed=0, device="cpu", verbose=0
    ).learn(1024)
    episodes = list(model.ep_info_buffer)
    assert len(episodes) >= 8 and all(e["l"] >= 8 and e["r"] == e["l"] for e in episodes)


def test_our_wrappers_inside_the_adapter():
    env = RecordEpisodeStatistics(gym.make_vec("GPUCartPole-v1", num_envs=4, device="cpu"))
    venv = SB3VecEnv(NormalizeObservation(env))
    assert venv.device == torch.device("cpu")
    venv.seed(0)
    venv.reset()
    for _ in range(40):
        obs, _, dones, infos = venv.step(np.ones(4, dtype=np.int64))
        assert np.abs(obs).max() < 10  # normalized
    assert env.episode_count >= 4


def test_vec_monitor_vec_normalize_and_vec_check_nan_on_top():
    venv = VecCheckNan(SB3VecEnv("GPUPendulum-v1", num_envs=4, device="cpu"), raise_exception=True)
    venv = VecNormalize(VecMonitor(venv), gamma=0.99)
    venv.seed(0)
    obs = venv.reset()
    assert obs.shape == (4, 3)
    episodes = []
    for _ in range(201):
        actions = np.stack([venv.action_space.sample() for _ in range(4)])
        obs, rewards, dones, infos = venv.step(actions)
        episodes += [info["episode"] for info in infos if "episode" in info]
    assert len(episodes) == 4
    assert all(e["l"] == 200 for e in episodes)  # Pendulum's time limit
    assert all(e["r"] < 0 for e in episodes)  # raw returns, before normalization
    assert np.abs(obs).max() <= venv.clip_obs
    assert venv.obs_rms.count > 200 * 4


def test_single_env_view_passes_sb3_check_env():
    sb3_check_env(gym.make("GPUCartPole-v1"), warn=True)
    sb3_check_env(gym.make("GPUPendulum-v1"), warn=True)


def test_missing_extra_names_it():
    code = textwrap.dedent("""
        import sys
        sys.modules["stable_baselines3"] = None
        try:
            import gpu_vecenv.adapters.sb3
        except ImportError as error:
            print(error)
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "pip install 'gpu-vecenv[sb3]'" in out


def test_tag_through_its_agent_slot_view():
    # 2 games x 11 agents, short games
    venv = SB3VecEnv("GPUTag-v0", num_envs=2, device="cpu", episode_length=20)
    assert venv.num_envs == 22
    assert isinstance(venv.action_space, gym.spaces.MultiDiscrete)
    venv.seed(0)
    obs = venv.reset()
    assert obs.shape == (22, *venv.observation_space.shape)
    ended = np.zeros(22, dtype=bool)
    truncations = 0
    for _ in range(45):
        actions = np.stack([venv.action_space.sample() for _ in range(22)])
        obs, rewards, dones, infos = venv.step(actions)
        for i in np.flatnonzero(dones):
            assert infos[i]["terminal_observation"].shape == venv.observation_space.shape
            truncations += infos[i]["TimeLimit.truncated"]
        ended |= dones
    assert ended.all() and truncations > 0


def test_reset_obs_do_not_alias_a_reused_buffer():
    venv = SB3VecEnv(
        make_vec("GPUCartPole-v1", 4, device="cpu", autoreset_mode="SAME_STEP", copy=False)
    )
    venv.seed(0)
    first = venv.reset()
    kept = first.copy()
    venv.step(np.ones(4, dtype=np.int64))
    np.testing.assert_array_equal(first, kept)
