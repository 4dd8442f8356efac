"""Our torch observation transforms against Gymnasium's: the same observation spaces, the
same values on the same observations, as tensors on the env's device; and what
Gymnasium's cannot do: SAME_STEP's ``final_obs``, Tag's idle slots."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as gymnasium_vector

from gpu_vecenv import wrappers as ours
from tests.wrappers.scripted_env import ScriptedVectorEnv, random_script

# Gymnasium's Box warns when it casts bounds (as it does for Gymnasium's own wrappers)
pytestmark = pytest.mark.filterwarnings("ignore:.*(precision lowered|overflow encountered)")

INF = np.float32(np.inf)
CARTPOLE_BOUNDS = (
    np.array([-1, -INF, -1, -INF], np.float32),
    np.array([1, INF, 1, INF], np.float32),
)

# name -> (env id, arguments after env); the reference is Gymnasium's wrapper of the name
CASES = {
    "flatten": ("GPUPendulum-v1", "FlattenObservation", ()),
    "reshape": ("GPUPendulum-v1", "ReshapeObservation", ((3, 1),)),
    "reshape_minus_one": ("GPUCartPole-v1", "ReshapeObservation", ((2, -1),)),
    "rescale": ("GPUPendulum-v1", "RescaleObservation", (-1.0, 1.0)),
    "rescale_arrays": ("GPUCartPole-v1", "RescaleObservation", CARTPOLE_BOUNDS),
    "dtype": ("GPUPendulum-v1", "DtypeObservation", (np.float64,)),
}


def references(env_id: str, name: str, args: tuple):
    """Gymnasium's wrapper ``name`` over Gymnasium's own env (numpy, for its spaces and
    its ``observations`` function)."""
    if name == "ReshapeObservation" and -1 in args[0]:
        args = ((2, 2),)  # Gymnasium's product check refuses -1; the result is this shape
    base = gym.make_vec(env_id[3:], num_envs=3, vectorization_mode="sync")
    return getattr(gymnasium_vector, name)(base, *args)


@pytest.mark.parametrize("case", sorted(CASES))
def test_spaces_and_values_are_gymnasiums(case):
    env_id, name, args = CASES[case]
    env = gym.make_vec(env_id, num_envs=3, device="cpu")
    raw = gym.make_vec(env_id, num_envs=3, device="cpu")
    wrapped = getattr(ours, name)(env, *args)
    reference = references(env_id, name, args)
    assert wrapped.single_observation_space == reference.single_observation_space
    assert wrapped.observation_space == reference.observation_space

    obs, _ = wrapped.reset(seed=5)
    raw_obs, _ = raw.reset(seed=5)
    for _ in range(6):
        expected = reference.observations(raw_obs.numpy())
        assert isinstance(obs, torch.Tensor) and obs.device.type == "cpu"
        assert obs.dtype == torch.from_numpy(np.asarray(expected)).dtype
        torch.testing.assert_close(obs, torch.from_numpy(np.asarray(expected)), rtol=0, atol=0)
        assert wrapped.observation_space.contains(obs.numpy())
        actions = torch.as_tensor(np.stack([raw.single_action_space.sample() for _ in range(3)]))
        obs = wrapped.step(actions)[0]
        raw_obs = raw.step(actions)[0]


def test_same_step_final_obs_is_transformed():
    env = gym.make_vec("GPUCartPole-v1", 8, device="cpu", autoreset_mode=AutoresetMode.SAME_STEP)
    raw = gym.make_vec("GPUCartPole-v1", 8, device="cpu", autoreset_mode=AutoresetMode.SAME_STEP)
    wrapped = ours.RescaleObservation(ours.DtypeObservation(env, torch.float64),
                                      *CARTPOLE_BOUNDS)
    wrapped.reset(seed=1)
    raw.reset(seed=1)
    finals = 0
    for _ in range(40):  # always pushing right: the pole falls within ~10 steps
        actions = torch.ones(8, dtype=torch.int64)
        _, _, _, _, info = wrapped.step(actions)
        _, _, _, _, raw_info = raw.step(actions)
        expected = wrapped.gradient * raw_info["final_obs"].double() + wrapped.intercept
        assert info["final_obs"].dtype == torch.float64
        torch.testing.assert_close(info["final_obs"], expected, rtol=0, atol=0)
        finals += int(raw_info["_final_obs"].sum())
    assert finals > 0


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_idle_slots_stay_zero_and_nothing_is_read_back(mode):
    """Tag's layout (2 games x 2 agents, ``info["active"]``) on meta tensors: any read of
    a value to the host would raise. Idle slots are zero on the CPU."""
    script = random_script(4, 4)
    script.active = np.ones((5, 4), dtype=bool)
    script.active[2:, 1] = False  # slot 1 leaves its game after step 1
    for device in ("meta", "cpu"):
        env = ScriptedVectorEnv(script, mode, device=device, games=(2, 2), obs_bound=50.0)
        wrapped = ours.FlattenObservation(
            ours.DtypeObservation(ours.RescaleObservation(env, -1.0, 1.0), torch.float64)
        )
        obs, _ = wrapped.reset(seed=0)
        for t in range(3):
            obs, *_, info = wrapped.step(torch.zeros(4, dtype=torch.int64, device=device))
            if device == "cpu":
                assert bool((obs[1] == 0).all()) == (t >= 1)
                assert bool((obs[[0, 2, 3]] != 0).all())
        assert obs.device.type == device and obs.dtype == torch.float64
        if mode == AutoresetMode.SAME_STEP:
            assert info["final_obs"].device.type == device


def test_dtype_takes_torch_numpy_and_string_dtypes():
    env = gym.make_vec("GPUCartPole-v1", 2, device="cpu")
    for dtype in (torch.float16, np.float16, "float16"):
        wrapped = ours.DtypeObservation(env, dtype)
        assert wrapped.reset(seed=0)[0].dtype == torch.float16
        assert wrapped.single_observation_space.dtype == np.float16
    with pytest.raises(TypeError, match="both torch and numpy"):
        ours.DtypeObservation(env, torch.bfloat16)


def test_bad_arguments_are_refused_as_gymnasium_refuses_them():
    env = gym.make_vec("GPUPendulum-v1", 2, device="cpu")
    with pytest.raises(ValueError, match="does not hold the 3 elements"):
        ours.ReshapeObservation(env, (2, 2))
    with pytest.raises(TypeError, match="tuple of ints"):
        ours.ReshapeObservation(env, (3.0,))
    with pytest.raises(ValueError, match="greater than 0 or -1"):
        ours.ReshapeObservation(env, (0, 3))
    cartpole = gym.make_vec("GPUCartPole-v1", 2, device="cpu")
    with pytest.raises(ValueError, match="unbounded components"):  # Gymnasium's message
        ours.RescaleObservation(cartpole, -1.0, 1.0)
    with pytest.raises(TypeError, match="Expected new_min"):
        ours.RescaleObservation(env, [-1.0] * 3, 1.0)
