"""The TorchRL adapter: specs, partial resets, seeding and a collector."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from tensordict import TensorDict
from torchrl.data import Bounded, Categorical, MultiCategorical
from torchrl.envs.utils import RandomPolicy, check_env_specs

from gpu_vecenv import make_vec
from gpu_vecenv.adapters.torchrl import TorchRLEnv, space_to_spec
from gpu_vecenv.env_ids import shipped_ids

try:  # TorchRL >= 0.11 names the synchronous collector Collector
    from torchrl.collectors import Collector
except ImportError:  # pragma: no cover - older TorchRL
    from torchrl.collectors import SyncDataCollector as Collector

IDS = shipped_ids(single_agent=True)


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_specs(env_id):
    env = TorchRLEnv(env_id, num_envs=6, device="cpu")
    assert env.batch_size == torch.Size([6])
    check_env_specs(env, seed=0)


def test_specs_follow_the_spaces():
    import gymnasium as gym

    device = torch.device("cpu")
    spec = space_to_spec(gym.spaces.Discrete(3), (5,), device)
    assert isinstance(spec, Categorical) and spec.shape == (5,) and spec.n == 3
    spec = space_to_spec(gym.spaces.MultiDiscrete([2, 5]), (5,), device)
    assert isinstance(spec, MultiCategorical) and spec.shape == (5, 2)
    spec = space_to_spec(gym.spaces.Box(-2.0, 2.0, (1,)), (5,), device)
    assert isinstance(spec, Bounded) and spec.shape == (5, 1)
    assert torch.equal(spec.space.high, torch.full((5, 1), 2.0))


def test_rollout_resets_exactly_the_done_envs():
    env = TorchRLEnv("GPUCartPole-v1", num_envs=8, device="cpu", max_episode_steps=30)
    env.set_seed(0)
    torch.manual_seed(0)
    td = env.rollout(80, break_when_any_done=False)
    assert td.batch_size == torch.Size([8, 80])
    done = td["next", "done"].squeeze(-1)
    assert done.any(dim=1).all()  # every env ended at least once within 80 steps
    # after a done, the next root observation is a fresh start: |state| <= 0.05
    following = td["observation"][:, 1:][done[:, :-1]]
    assert following.abs().max() <= 0.05
    # and episodes never run past the time limit
    steps_since_reset = torch.zeros(8, dtype=torch.int64)
    for t in range(80):
        steps_since_reset += 1
        assert (steps_since_reset <= 30).all()
        steps_since_reset[done[:, t]] = 0


def test_partial_reset_through_reset_key():
    env = TorchRLEnv("GPUCartPole-v1", num_envs=4, device="cpu")
    td = env.reset()
    td["action"] = torch.ones(4, dtype=torch.int64)
    stepped = env.step(td)["next", "observation"].clone()
    mask = torch.tensor([[True], [False], [False], [True]])
    out = env._reset(TensorDict({"_reset": mask}, batch_size=[4]))
    assert torch.equal(out["observation"][1:3], stepped[1:3])
    assert not torch.equal(out["observation"][0], stepped[0])
    # nothing to reset: nothing changes
    again = env._reset(TensorDict({"_reset": torch.zeros(4, 1, dtype=torch.bool)},
                                 batch_size=[4]))
    assert torch.equal(again["observation"], out["observation"])


def test_same_seed_same_rollout():
    def run():
        env = TorchRLEnv("GPUMountainCarContinuous-v0", num_envs=3, device="cpu")
        env.set_seed(11)
        torch.manual_seed(0)
        return env.rollout(50, break_when_any_done=False)

    a, b = run(), run()
    assert torch.equal(a["next", "observation"], b["next", "observation"])
    assert torch.equal(a["next", "reward"], b["next", "reward"])


def test_needs_disabled_autoreset():
    with pytest.raises(ValueError, match="DISABLED"):
        TorchRLEnv(make_vec("GPUCartPole-v1", 2, device="cpu"))
    env = TorchRLEnv(make_vec("GPUCartPole-v1", 2, device="cpu", autoreset_mode="DISABLED"))
    assert env.batch_size == torch.Size([2])
    with pytest.raises(ValueError, match="copy=True"):
        TorchRLEnv(make_vec("GPUCartPole-v1", 2, device="cpu", autoreset_mode="DISABLED",
                            copy=False))


def test_synchronous_collector():
    env = TorchRLEnv("GPUCartPole-v1", num_envs=16, device="cpu", max_episode_steps=20)
    collector = Collector(env, RandomPolicy(env.action_spec), frames_per_batch=16 * 8,
                                  total_frames=16 * 8 * 3)
    batches = [batch for batch in collector]
    collector.shutdown()
    assert len(batches) == 3
    assert batches[0].batch_size == torch.Size([16, 8])
    assert batches[-1]["next", "done"].any()


def test_missing_extra_names_it():
    code = textwrap.dedent("""
        import sys
        sys.modules["torchrl"] = None
        try:
            import gpu_vecenv.adapters.torchrl
        except ImportError as error:
            print(error)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "pip install 'gpu-vecenv[torchrl]'" in out
