"""Which of Gymnasium's own vector wrappers work on our envs as they are: each is tried
(with our check of them switched off), and the outcome must be the one docs/wrappers.md
states; and what our check says when each wraps one of our envs (the table's last
column), which must fit the outcome: an error where the wrapper breaks, a warning at
least where it hands back numpy arrays.

Outcomes: ``works`` (runs; obs and rewards stay torch tensors on the env's device),
``numpy`` (runs, but hands back numpy arrays), ``refuses`` (raises at construction: the
wrapper does not support SAME_STEP autoreset), ``breaks`` (raises on our tensors), ``n/a``
(our envs have no observation or action space it applies to).

Columns: our env on the CPU in NEXT_STEP and in SAME_STEP mode, and a stand-in env whose
tensors are on torch's ``meta`` device. Meta tensors hold no data, so a wrapper that
reads values to the host or mixes in numpy fails there, as it would fail (or sync) with
CUDA tensors. That column is the proxy for a GPU; no GPU was used.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import wrappers as SingleEnv
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as W

from gpu_vecenv import gymnasium_wrapper_check
from gpu_vecenv.gymnasium_wrapper_check import VERDICTS, NumpyWrapperWarning
from tests.wrappers.scripted_env import ScriptedVectorEnv, random_script

DOCS = Path(__file__).resolve().parents[2] / "docs" / "wrappers.md"

# name -> (how to wrap, which env: "discrete" CartPole or "box" Pendulum)
WRAPPERS: dict[str, tuple[Callable[[gym.vector.VectorEnv], gym.vector.VectorEnv], str]] = {
    "RecordEpisodeStatistics": (W.RecordEpisodeStatistics, "discrete"),
    "NormalizeObservation": (W.NormalizeObservation, "discrete"),
    "NormalizeReward": (W.NormalizeReward, "discrete"),
    "RecordVideo": (lambda e: W.RecordVideo(e, "/tmp/gpu_vecenv_gym_videos"), "discrete"),
    "HumanRendering": (W.HumanRendering, "discrete"),
    "DictInfoToList": (W.DictInfoToList, "discrete"),
    "FlattenObservation": (W.FlattenObservation, "discrete"),
    "DtypeObservation": (lambda e: W.DtypeObservation(e, np.float64), "discrete"),
    "ReshapeObservation": (lambda e: W.ReshapeObservation(e, (3, 1)), "box"),
    "RescaleObservation": (lambda e: W.RescaleObservation(e, -1.0, 1.0), "box"),
    "TransformObservation": (
        lambda e: W.TransformObservation(e, lambda o: o * 2, e.observation_space),
        "discrete",
    ),
    "FilterObservation": (lambda e: W.FilterObservation(e, ["a"]), "discrete"),
    "GrayscaleObservation": (W.GrayscaleObservation, "discrete"),
    "ResizeObservation": (lambda e: W.ResizeObservation(e, (2, 2)), "discrete"),
    "ClipAction": (W.ClipAction, "box"),
    "RescaleAction": (lambda e: W.RescaleAction(e, -1.0, 1.0), "box"),
    "TransformAction": (lambda e: W.TransformAction(e, lambda a: a, e.action_space), "discrete"),
    "ClipReward": (lambda e: W.ClipReward(e, -0.5, 0.5), "discrete"),
    "TransformReward": (lambda e: W.TransformReward(e, lambda r: r * 2), "discrete"),
    "VectorizeTransformObservation": (
        lambda e: W.VectorizeTransformObservation(e, SingleEnv.DtypeObservation, dtype=np.float64),
        "box",
    ),
    "VectorizeTransformAction": (
        lambda e: W.VectorizeTransformAction(
            e, SingleEnv.TransformAction, func=lambda a: a, action_space=e.single_action_space
        ),
        "box",
    ),
    "VectorizeTransformReward": (
        lambda e: W.VectorizeTransformReward(e, SingleEnv.TransformReward, func=lambda r: r * 2),
        "discrete",
    ),
}
NOT_APPLICABLE = {"FilterObservation", "GrayscaleObservation", "ResizeObservation"}
ENV_IDS = {"discrete": "GPUCartPole-v1", "box": "GPUPendulum-v1"}


def make_env(kind: str, where: str, mode: AutoresetMode) -> gym.vector.VectorEnv:
    if where == "meta":
        script = random_script(5, 4, obs_dim=4 if kind == "discrete" else 3)
        action = (
            gym.spaces.Discrete(2)
            if kind == "discrete"
            else gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
        )
        return ScriptedVectorEnv(script, mode, device="meta", action_space=action, obs_bound=10.0)
    render = {"render_mode": "rgb_array"}
    return gym.make_vec(ENV_IDS[kind], num_envs=4, device="cpu", autoreset_mode=mode, **render)


def outcome(name: str, where: str, mode: AutoresetMode) -> str:
    """What Gymnasium's wrapper ``name`` does on our env, our check of it switched off."""
    wrap, kind = WRAPPERS[name]
    env = make_env(kind, where, mode)
    device = torch.device(where)
    try:
        envs = wrap(env)
    except Exception as error:  # noqa: BLE001 - the kind of failure is the finding
        if name in NOT_APPLICABLE:
            return "n/a"
        if isinstance(error, ValueError) and "autoreset" in str(error).lower():
            return "refuses"
        return "breaks"
    try:
        obs, _ = envs.reset(seed=0)
        for _ in range(5):
            sample = np.stack([env.single_action_space.sample() for _ in range(4)])
            obs, reward, *_ = envs.step(torch.as_tensor(sample, device=device))
    except Exception:  # noqa: BLE001 - any failure on our tensors is the finding
        return "breaks"
    if not all(isinstance(x, torch.Tensor) for x in (obs, reward)):
        return "numpy"
    return "works" if obs.device == reward.device == device else "breaks"


def documented() -> dict[str, list[str]]:
    """``{wrapper: [NEXT_STEP, SAME_STEP, device, our check on the CPU, on a GPU]}`` from
    the table in docs/wrappers.md (check: ``error``, ``warning`` or ``-``)."""
    rows = {}
    for line in DOCS.read_text().splitlines():
        match = re.match(r"\|\s*`(\w+)`\s*\|(.*)", line)
        if match and match.group(1) in WRAPPERS:
            cells = [c.strip() for c in match.group(2).split("|")]
            checks = [c.split()[0] for c in cells[3].split("/")]
            rows[match.group(1)] = [c.split()[0].strip("*").lower() for c in cells[:3]] + checks
    return rows


@pytest.fixture(scope="module")
def table() -> dict[str, list[str]]:
    return documented()


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_outcome_is_the_documented_one(name, table, monkeypatch):
    monkeypatch.setattr(gymnasium_wrapper_check, "check", lambda *args: None)
    found = [
        outcome(name, "cpu", AutoresetMode.NEXT_STEP),
        outcome(name, "cpu", AutoresetMode.SAME_STEP),
        outcome(name, "meta", AutoresetMode.NEXT_STEP),
    ]
    assert name in table, f"docs/wrappers.md has no row for {name}"
    assert found == table[name][:3], f"{name}: found {found}, documented {table[name][:3]}"


def what_the_check_says(
    name: str, device: str, mode: AutoresetMode = AutoresetMode.NEXT_STEP
) -> str:
    """``error``, ``warning`` or ``-``: what building Gymnasium's wrapper ``name`` around
    our CartPole or Pendulum does. ``device="gpu"`` runs the check as for an env on a GPU:
    the env is on the CPU but says ``cuda`` (only the check reads it)."""
    wrap, kind = WRAPPERS[name]
    env = make_env(kind, "cpu", mode)
    if device == "gpu":
        env.device = torch.device("cuda", 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            wrap(env)
        except TypeError as error:
            if "docs/wrappers.md lists" in str(error):
                return "error"
        except Exception:  # noqa: BLE001 - the wrapper's own refusal is not our check
            pass
    return "warning" if any(w.category is NumpyWrapperWarning for w in caught) else "-"


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_the_check_says_what_the_table_says(name, table):
    found = [what_the_check_says(name, "cpu"), what_the_check_says(name, "gpu")]
    assert found == table[name][3:], f"{name}: the check says {found}, documented " \
        f"{table[name][3:]}"
    assert (name in VERDICTS) == (found != ["-", "-"])


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_the_check_speaks_where_the_wrapper_fails(name, table):
    """Where the wrapper breaks on our env, the check errs (or warns, where numpy actions
    would still work); where it hands back numpy arrays, the check at least warns."""
    cpu, same_step, gpu, check_cpu, check_gpu = table[name]
    check_same_step = what_the_check_says(name, "cpu", AutoresetMode.SAME_STEP)
    for found, said in ((cpu, check_cpu), (same_step, check_same_step), (gpu, check_gpu)):
        if found == "breaks" and not name.endswith("Action"):
            assert said == "error", f"{name} breaks but the check says {said}"
        if found in ("breaks", "numpy"):
            assert said in ("error", "warning"), f"{name} {found} but the check is silent"


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, "tag"])
def test_dict_info_to_list_is_an_error_where_info_holds_tensors(mode):
    if mode == "tag":
        env = gym.make_vec("GPUTag-v0", device="cpu")
    else:
        env = gym.make_vec("GPUCartPole-v1", num_envs=2, device="cpu", autoreset_mode=mode)
    with pytest.raises(TypeError, match="DictInfoToList.*info holds tensors"):
        W.DictInfoToList(env)


def test_the_check_looks_through_our_wrappers_only():
    from gpu_vecenv.wrappers import NormalizeObservation

    env = gym.make_vec("GPUCartPole-v1", num_envs=2, device="cpu")
    with pytest.raises(TypeError, match="gpu_vecenv.wrappers.RecordEpisodeStatistics"):
        W.RecordEpisodeStatistics(NormalizeObservation(env))

    class ToNumpy(gym.vector.VectorWrapper):  # a user's wrapper: it may change the arrays
        pass

    W.RecordEpisodeStatistics(ToNumpy(env))  # no error: the check cannot know
    # Gymnasium's own envs are left alone
    W.RecordEpisodeStatistics(gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"))


def test_a_subclass_is_checked_once_as_itself():
    env = gym.make_vec("GPUPendulum-v1", num_envs=2, device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        W.DtypeObservation(env, np.float64)  # built on VectorizeTransformObservation
    ours = [w for w in caught if w.category is NumpyWrapperWarning]
    assert len(ours) == 1 and "DtypeObservation" in str(ours[0].message)
    assert ours[0].filename == __file__  # points at the line that built the wrapper


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # numpy 2 on torch's __array_wrap__
def test_working_wrappers_compute_the_right_values():
    env = gym.make_vec("GPUCartPole-v1", num_envs=4, device="cpu")
    envs = W.TransformReward(W.ClipReward(env, 0.0, 0.25), lambda r: r * 2)
    envs.reset(seed=0)
    assert envs.step(torch.zeros(4, dtype=torch.int64))[1].tolist() == [0.5] * 4
    pendulum = gym.make_vec("GPUPendulum-v1", num_envs=2, device="cpu")
    raw = gym.make_vec("GPUPendulum-v1", num_envs=2, device="cpu")
    envs = W.ClipAction(W.RescaleAction(pendulum, np.float32(-1.0), np.float32(1.0)))
    envs.reset(seed=0)
    raw.reset(seed=0)
    # ClipAction clips 5.0 to 1.0; RescaleAction maps [-1, 1] to [-2, 2]
    obs = envs.step(torch.tensor([[0.5], [5.0]]))[0]
    torch.testing.assert_close(obs, raw.step(torch.tensor([[1.0], [2.0]]))[0])
