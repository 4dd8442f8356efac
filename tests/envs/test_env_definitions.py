"""Each classic env module against its contract and against Gymnasium's declarations:
constants, spaces, time limits, ``check_env``, the reset distribution and seeding, and
the shape of the reference functions (batched, no value-dependent control flow)."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
import types
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from gymnasium.vector.utils import batch_space

from gpu_vecenv import seeding
from gpu_vecenv.env_ids import ENVS, declared_time_limit
from tests.envs.gymnasium_cases import CASES, set_gym_state

NAMES = list(CASES)

# Our params field -> the attribute holding the same constant on Gymnasium's env.
GYMNASIUM_CONSTANTS = {
    "cartpole": {
        "gravity": "gravity", "masscart": "masscart", "masspole": "masspole",
        "length": "length", "force_mag": "force_mag", "tau": "tau",
        "theta_threshold_radians": "theta_threshold_radians", "x_threshold": "x_threshold",
    },
    "acrobot": {
        "dt": "dt", "link_length_1": "LINK_LENGTH_1", "link_mass_1": "LINK_MASS_1",
        "link_mass_2": "LINK_MASS_2", "link_com_pos_1": "LINK_COM_POS_1",
        "link_com_pos_2": "LINK_COM_POS_2", "link_moi": "LINK_MOI", "max_vel_1": "MAX_VEL_1",
        "max_vel_2": "MAX_VEL_2", "book_or_nips": "book_or_nips",
    },
    "mountain_car": {
        "min_position": "min_position", "max_position": "max_position",
        "max_speed": "max_speed", "goal_position": "goal_position",
        "goal_velocity": "goal_velocity", "force": "force", "gravity": "gravity",
    },
    "mountain_car_continuous": {
        "min_action": "min_action", "max_action": "max_action",
        "min_position": "min_position", "max_position": "max_position",
        "max_speed": "max_speed", "goal_position": "goal_position",
        "goal_velocity": "goal_velocity", "power": "power",
    },
    "pendulum": {
        "g": "g", "mass": "m", "length": "l", "dt": "dt", "max_speed": "max_speed",
        "max_torque": "max_torque",
    },
}  # fmt: skip

# Gymnasium's starting-state bounds (inclusive), per state field, from its reset().
START_BOUNDS = {
    "cartpole": ([-0.05] * 4, [0.05] * 4),
    "acrobot": ([-0.1] * 4, [0.1] * 4),
    "mountain_car": ([-0.6, 0.0], [-0.4, 0.0]),
    "mountain_car_continuous": ([-0.6, 0.0], [-0.4, 0.0]),
    "pendulum": ([-math.pi, -1.0], [math.pi, 1.0]),
}

DOC_SECTIONS = ("Description", "Action Space", "Observation Space", "Rewards",
                "Starting State", "Episode End", "Arguments", "Version History")  # fmt: skip


def _module(name):
    return __import__(f"gpu_vecenv.envs.{name}", fromlist=["DEFINITION"])


# -- constants, params, module layout --


@pytest.mark.parametrize("name", NAMES)
def test_constants_equal_gymnasium(name):
    case = CASES[name]
    params, env = case.make_params(), case.make_gym()
    for ours, theirs in GYMNASIUM_CONSTANTS[name].items():
        assert getattr(params, ours) == getattr(env.unwrapped, theirs), ours
    if name == "acrobot":
        assert params.avail_torque == tuple(float(t) for t in env.unwrapped.AVAIL_TORQUE)
        assert env.unwrapped.torque_noise_max == 0.0  # not modelled; must stay Gymnasium's 0


def test_gravity_constants_not_in_gymnasium_attributes():
    """Two constants Gymnasium writes inline rather than as attributes."""
    from gymnasium.envs.classic_control import acrobot as gym_acrobot
    from gymnasium.envs.classic_control import continuous_mountain_car as gym_mcc

    assert "g = 9.8\n" in open(gym_acrobot.__file__).read()
    assert CASES["acrobot"].make_params().gravity == 9.8
    assert "- 0.0025 * math.cos(3 * position)" in open(gym_mcc.__file__).read()
    assert CASES["mountain_car_continuous"].make_params().gravity == 0.0025


@pytest.mark.parametrize("name", NAMES)
def test_module_layout(name):
    module, definition = _module(name), _module(name).DEFINITION
    assert definition.name == name
    assert definition.state_fields == module.STATE_FIELDS
    assert all(f.dtype == torch.float32 for f in definition.state_fields)
    params = definition.make_params()
    assert dataclasses.is_dataclass(params) and type(params).__dataclass_params__.frozen
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.__setattr__(dataclasses.fields(params)[0].name, 0.0)
    for f in dataclasses.fields(params):  # constants only: nothing mutable or derived
        assert isinstance(getattr(params, f.name), (bool, int, float, str, tuple)), f.name
    with pytest.raises(TypeError, match="unknown parameter"):
        definition.make_params(not_a_parameter=1.0)
    for section in DOC_SECTIONS:
        assert f"## {section}\n" in module.__doc__, section


def test_acrobot_rejects_unknown_equations():
    with pytest.raises(ValueError, match="book_or_nips"):
        CASES["acrobot"].definition.make_params(book_or_nips="paper")


@pytest.mark.parametrize("name", NAMES)
def test_time_limit_and_threshold_equal_gymnasium(name):
    case = CASES[name]
    spec, entry = gym.spec(case.gym_id), ENVS[case.env_id]
    assert entry.module == f"gpu_vecenv.envs.{name}"
    assert case.definition.max_episode_steps == entry.max_episode_steps == spec.max_episode_steps
    assert entry.reward_threshold == spec.reward_threshold
    assert gym.spec(case.env_id).max_episode_steps == spec.max_episode_steps


@pytest.mark.parametrize("name", NAMES)
def test_registry_reads_the_time_limit_from_the_definitions_source(name, monkeypatch):
    """The registry takes a shipped env's limit from ``envs/<name>.py`` without importing it
    (it is read inside ``import gymnasium``): the value read equals the imported one."""
    module = f"gpu_vecenv.envs.{name}"
    monkeypatch.delitem(sys.modules, module)
    assert declared_time_limit(module) == CASES[name].definition.max_episode_steps
    assert module not in sys.modules
    # the module being imported (its own import of gymnasium registers the ids): no
    # DEFINITION yet, so its text answers
    monkeypatch.setitem(sys.modules, module, types.ModuleType(module))
    assert declared_time_limit(module) == CASES[name].definition.max_episode_steps


@pytest.mark.parametrize("name", ["tag", "tag_grid"])
def test_a_multi_agent_module_leaves_the_time_limit_to_its_params(name, monkeypatch):
    module = f"gpu_vecenv.envs.{name}"
    monkeypatch.delitem(sys.modules, module, raising=False)
    assert declared_time_limit(module) is None
    assert module not in sys.modules


@pytest.mark.parametrize("module", ["cartpole", "tag"])
def test_importing_an_env_module_first_registers_every_id(module):
    code = (f"import gpu_vecenv.envs.{module}, gymnasium, gpu_vecenv.env_ids as ids; "
            "missing = set(ids.SHIPPED_IDS) - set(gymnasium.registry); "
            "assert not missing, missing")
    result = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


# -- spaces and the Gymnasium API --


def _assert_same_space(ours: gym.Space, theirs: gym.Space):
    assert type(ours) is type(theirs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    if isinstance(theirs, gym.spaces.Discrete):
        assert (ours.n, ours.start) == (theirs.n, theirs.start)
    else:
        np.testing.assert_array_equal(ours.low, theirs.low)
        np.testing.assert_array_equal(ours.high, theirs.high)
        assert ours.low.dtype == theirs.low.dtype and ours.high.dtype == theirs.high.dtype


@pytest.mark.parametrize("name", NAMES)
def test_spaces_equal_gymnasium(name):
    case = CASES[name]
    theirs = gym.make(case.gym_id)
    ours = gym.make(case.env_id)
    _assert_same_space(ours.observation_space, theirs.observation_space)
    _assert_same_space(ours.action_space, theirs.action_space)
    vector = case.make_ours(3)
    _assert_same_space(vector.single_observation_space, theirs.observation_space)
    _assert_same_space(vector.single_action_space, theirs.action_space)
    assert vector.observation_space == batch_space(theirs.observation_space, 3)
    assert vector.action_space == batch_space(theirs.action_space, 3)
    ours.close(), theirs.close(), vector.close()


def _checker_warnings(env: gym.Env) -> set[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    return {str(w.message) for w in caught}


@pytest.mark.parametrize("name", NAMES)
def test_check_env_passes(name):
    """``check_env`` raises on any API violation; it may only warn about what it also
    warns about for Gymnasium's own env (unbounded CartPole velocities, Pendulum's
    non-normalized torque range)."""
    case = CASES[name]
    ours = gym.make(case.env_id)
    theirs = gym.make(case.gym_id)
    assert _checker_warnings(ours.unwrapped) <= _checker_warnings(theirs.unwrapped)


@pytest.mark.parametrize("name", NAMES)
def test_frames_are_gymnasiums(name):
    """render() draws the state through Gymnasium's renderer, fields in its order."""
    case = CASES[name]
    env = case.make_ours(2, render_mode="rgb_array", render_env_indices=(1,))
    env.reset(seed=5)
    state = np.stack(
        [env.buffers.state[f.name].numpy() for f in case.definition.state_fields], axis=1
    )
    (frame,) = env.render()
    theirs = type(case.make_gym())(render_mode="rgb_array")
    theirs.reset(seed=0)
    set_gym_state(case, theirs, state[1])
    expected = theirs.render()
    assert frame.dtype == np.uint8 and frame.shape == expected.shape
    np.testing.assert_array_equal(frame, expected)
    theirs.close()


# -- reference functions --


@pytest.mark.parametrize("name", NAMES)
def test_reference_runs_on_meta_device(name):
    """Tensors on the meta device carry shapes and dtypes but no values: any Python
    branch on a tensor value or host synchronization would raise here."""
    definition = CASES[name].definition
    params = definition.make_params()
    n = 7
    state = definition.reset(
        params, torch.empty(n, definition.num_reset_draws(params), device="meta")
    )
    space = definition.action_space(params)
    if isinstance(space, gym.spaces.Discrete):
        action = torch.empty(n, dtype=torch.int64, device="meta")
    else:
        action = torch.empty(n, *space.shape, dtype=torch.float32, device="meta")
    new_state, reward, terminated = definition.step(params, state, action)
    obs = definition.observe(params, new_state)
    assert set(new_state) == {f.name for f in definition.state_fields}
    for tensor in new_state.values():
        assert tensor.shape == (n,) and tensor.dtype == torch.float32
    assert reward.shape == (n,) and reward.dtype == torch.float32
    assert terminated.shape == (n,) and terminated.dtype == torch.bool
    assert obs.shape == (n, definition.observation_space(params).shape[0])
    assert obs.dtype == torch.float32


@pytest.mark.parametrize("name", NAMES)
def test_reset_is_the_kernels_affine_map(name):
    """``reset(params, u)`` is ``seeding.uniform(u, low, high)`` per drawn field (what
    the kernels reproduce), and constant fields are exactly their constant."""
    definition = CASES[name].definition
    params = definition.make_params()
    k = definition.num_reset_draws(params)
    index = torch.arange(64)
    u = seeding.random_uniform(torch.full_like(index, 3), index, torch.zeros_like(index), k)
    u[0] = 0.0
    u[1] = 1.0 - 2.0**-24
    state = definition.reset(params, u)
    low, high = START_BOUNDS[name]
    drawn = 0
    for j, f in enumerate(definition.state_fields):
        assert state[f.name].dtype == torch.float32 and state[f.name].shape == (64,)
        assert state[f.name].is_contiguous()
        if low[j] == high[j]:
            assert (state[f.name] == low[j]).all()
        else:
            expected = seeding.uniform(u[:, drawn], low[j], high[j])
            assert torch.equal(state[f.name], expected), f.name
            drawn += 1
    assert drawn == k


# -- reset distribution and seeding, through the runtime --


def _state(env) -> np.ndarray:
    return np.stack([env.buffers.state[f.name].numpy() for f in env.definition.state_fields], 1)


@pytest.mark.parametrize("name", NAMES)
def test_reset_distribution(name):
    case = CASES[name]
    n = 4096
    env = case.make_ours(n)
    obs, _ = env.reset(seed=2024)
    obs = obs.numpy()
    assert obs.shape == (n, env.obs_dim) and obs.dtype == np.float32
    assert all(env.single_observation_space.contains(row) for row in obs[:512])
    space = env.single_observation_space
    assert (obs >= space.low).all() and (obs <= space.high).all()

    state = _state(env)
    low = np.array(START_BOUNDS[name][0], dtype=np.float32)
    high = np.array(START_BOUNDS[name][1], dtype=np.float32)
    assert (state >= low).all() and (state <= high).all()
    span = (high - low).astype(np.float64)
    varying = span > 0
    # Uniform over the whole interval: both ends reached, centred, flat spread.
    assert (state.min(0)[varying] < low[varying] + 0.01 * span[varying]).all()
    assert (state.max(0)[varying] > high[varying] - 0.01 * span[varying]).all()
    standard_error = span / math.sqrt(12 * n)
    centre = (low.astype(np.float64) + high) / 2
    assert (np.abs(state.mean(0) - centre)[varying] < 5 * standard_error[varying]).all()
    np.testing.assert_allclose(state.std(0)[varying], span[varying] / math.sqrt(12), rtol=0.05)
    # Different envs draw different states.
    assert len(np.unique(state[:, varying], axis=0)) == n


@pytest.mark.parametrize("name", NAMES)
def test_gymnasium_resets_inside_the_same_bounds(name):
    """The bounds table above is Gymnasium's: its own resets stay inside it."""
    case = CASES[name]
    env = case.make_gym()
    low, high = (np.array(b, dtype=np.float32) for b in START_BOUNDS[name])
    for seed in range(200):
        env.reset(seed=seed)
        state = np.array(env.unwrapped.state, dtype=np.float32)
        assert (state >= low).all() and (state <= high).all(), (seed, state)


@pytest.mark.parametrize("name", NAMES)
def test_reset_seeding(name):
    case = CASES[name]
    first, second, other = (case.make_ours(256) for _ in range(3))
    obs_a, _ = first.reset(seed=7)
    obs_b, _ = second.reset(seed=7)
    obs_c, _ = other.reset(seed=8)
    assert torch.equal(obs_a, obs_b)
    assert np.array_equal(_state(first), _state(second))
    differs = (obs_a != obs_c).any(dim=1)
    assert bool(differs.all())
    # The next reset continues the stream: new states, again equal across equal seeds.
    again_a, _ = first.reset()
    again_b, _ = second.reset()
    assert torch.equal(again_a, again_b) and bool((again_a != obs_a).any(dim=1).all())


def test_acrobot_wrap_equals_gymnasiums_loops():
    """The closed-form wrap against Gymnasium's ``wrap`` (while loops), far beyond one
    turn and on the boundaries, where Gymnasium keeps both -pi and pi."""
    from gymnasium.envs.classic_control.acrobot import wrap

    from gpu_vecenv.envs.acrobot import _wrap

    k = np.arange(-7, 8)
    x = np.concatenate([np.linspace(-60.0, 60.0, 20001), k * np.pi, np.nextafter(k * np.pi, 0)])
    expected = np.array([wrap(v, -np.pi, np.pi) for v in x])
    ours = _wrap(torch.from_numpy(x), -math.pi, math.pi).numpy()
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-13)
    assert (ours >= -np.pi).all() and (ours <= np.pi).all()
    assert (ours[x == np.pi] == np.pi).all() and (ours[x == -np.pi] == -np.pi).all()
    ours32 = _wrap(torch.from_numpy(x.astype(np.float32)), -math.pi, math.pi).numpy()
    pi32 = np.float32(np.pi)
    assert (ours32 >= -pi32).all() and (ours32 <= pi32).all()
    np.testing.assert_allclose(np.cos(ours32), np.cos(x), atol=2e-5)
