"""Which of Gymnasium's own vector wrappers work on our envs as they are: each is tried,
and the outcome must be the one docs/wrappers.md states.

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
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as W

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
    """``{wrapper: [NEXT_STEP, SAME_STEP, device]}`` from the table in docs/wrappers.md."""
    rows = {}
    for line in DOCS.read_text().splitlines():
        match = re.match(r"\|\s*`(\w+)`\s*\|(.*)", line)
        if match and match.group(1) in WRAPPERS:
            cells = [c.strip() for c in match.group(2).split("|")]
            rows[match.group(1)] = [c.split()[0].strip("*").lower() for c in cells[:3]]
    return rows


@pytest.fixture(scope="module")
def table() -> dict[str, list[str]]:
    return documented()


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_outcome_is_the_documented_one(name, table):
    found = [
        outcome(name, "cpu", AutoresetMode.NEXT_STEP),
        outcome(name, "cpu", AutoresetMode.SAME_STEP),
        outcome(name, "meta", AutoresetMode.NEXT_STEP),
    ]
    assert name in table, f"docs/wrappers.md has no row for {name}"
    assert found == table[name], f"{name}: found {found}, documented {table[name]}"


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
