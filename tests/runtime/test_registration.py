"""``gpu_vecenv.register``: a user's env is made by id everywhere a shipped id is (our
make_vec, Gymnasium's make_vec and make, check_env, the PettingZoo views, the adapters),
with Gymnasium's registration conventions and clear errors. The trainer's side is in
tests/train/test_registered_envs.py, the tutorial's CLI run in tests/examples."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import pytest

import gpu_vecenv
from gpu_vecenv.checks import check_env
from gpu_vecenv.env_ids import ENVS, UnknownEnvError
from gpu_vecenv.envs import tag_grid
from gpu_vecenv.multi_agent import MultiAgentVectorEnv
from gpu_vecenv.register_env import RegistrationError
from tests.runtime.counting_env import BOX_COUNTING, COUNTING


def register_counting(**options):
    options.setdefault("kwargs", {"terminate_at": 6.0})
    options.setdefault("max_episode_steps", 5)
    return gpu_vecenv.register("Counting-v0", COUNTING, reward_threshold=3.0, **options)


def test_a_registered_definition_is_made_by_every_entry_point():
    entry = register_counting()
    assert entry.id == "Counting-v0" and "Counting-v0" in gpu_vecenv.list_envs()

    env = gpu_vecenv.make_vec("Counting-v0", 2, device="cpu")
    assert env.definition is COUNTING and env.env_id == "Counting-v0"
    assert env.params.terminate_at == 6.0 and env.max_episode_steps == 5
    assert gpu_vecenv.make_vec("Counting-v0", 2, terminate_at=4.0).params.terminate_at == 4.0

    spec = gym.spec("Counting-v0")
    assert (spec.max_episode_steps, spec.reward_threshold, spec.kwargs) == (
        5,
        3.0,
        {"terminate_at": 6.0},
    )
    env = gym.make_vec("Counting-v0", num_envs=2, device="cpu")
    assert env.params.terminate_at == 6.0 and env.max_episode_steps == 5

    single = gym.make("Counting-v0")  # counts +1 per step, ends at 6: truncated after 5
    single.reset(seed=0)
    ends = [single.step(0)[2:4] for _ in range(5)]
    assert ends == [(False, False)] * 4 + [(False, True)]

    report = check_env("Counting-v0", num_envs=4, steps=8, seed_sensitive=False)
    assert "autoreset" in report.passed


def test_registering_again_follows_gymnasium_and_asks_for_override():
    first = register_counting()
    assert register_counting() is first  # the same registration again does nothing
    with pytest.raises(RegistrationError, match=r"override=True.*'Counting-v1'"):
        register_counting(kwargs={"terminate_at": 8.0})
    with pytest.raises(RegistrationError, match="already registered"):
        gpu_vecenv.register("Counting-v0", BOX_COUNTING)
    with pytest.raises(RegistrationError, match="override=True"):
        gpu_vecenv.register("GPUCartPole-v1", COUNTING)
    with pytest.raises(RegistrationError, match="already a Gymnasium env"):
        gpu_vecenv.register("CartPole-v1", COUNTING)
    assert ENVS["Counting-v0"] is first and gym.spec("Counting-v0").kwargs["terminate_at"] == 6

    register_counting(kwargs={"terminate_at": 8.0}, override=True)
    assert gpu_vecenv.make_vec("Counting-v0", 1).params.terminate_at == 8.0
    assert gym.spec("Counting-v0").kwargs == {"terminate_at": 8.0}

    # Gymnasium's own rule: no unversioned id beside versioned ones; nothing half-registered
    with pytest.raises(gym.error.RegistrationError, match="unversioned"):
        gpu_vecenv.register("Counting", COUNTING)
    assert "Counting" not in ENVS and "Counting" not in gym.registry
    entry = gpu_vecenv.register("my_namespace/Counting-v3", COUNTING)
    assert gpu_vecenv.make_vec(entry.id, 1).max_episode_steps == COUNTING.max_episode_steps


@pytest.mark.parametrize(
    ("env_id", "definition", "options", "error", "match"),
    [
        ("Counting v0", COUNTING, {}, RegistrationError, "malformed env id"),
        ("mod:Counting-v0", COUNTING, {}, RegistrationError, "separates a module"),
        (7, COUNTING, {}, TypeError, "must be a str"),
        ("Counting-v0", "counting", {}, TypeError, "EnvDefinition or a MultiAgentDefinition"),
        (
            "Counting-v0",
            COUNTING,
            {"kwargs": {"terminate_a": 1.0}},
            TypeError,
            "did you mean 'terminate_at'",
        ),
        (
            "Counting-v0",
            COUNTING,
            {"kwargs": {"autoreset_mode": "SameStep"}},
            TypeError,
            "unknown kwargs 'autoreset_mode'",
        ),
        ("Counting-v0", COUNTING, {"kwargs": {"backend": "numba"}}, ValueError, "backend"),
        ("Counting-v0", COUNTING, {"max_episode_steps": 0}, ValueError, "positive int"),
        ("Grid-v0", tag_grid.DEFINITION, {"kwargs": {"num_taggers": 0}}, ValueError, "num_taggers"),
        (
            "Grid-v0",
            tag_grid.DEFINITION,
            {"kwargs": {"preset": "nope"}},
            ValueError,
            "unknown preset",
        ),
    ],
)
def test_bad_registrations_say_what_is_wrong_and_register_nothing(
    env_id, definition, options, error, match
):
    before = dict(ENVS)
    with pytest.raises(error, match=match):
        gpu_vecenv.register(env_id, definition, **options)
    assert ENVS == before and env_id not in gym.registry


def test_unknown_ids_say_how_to_register():
    register_counting()
    with pytest.raises(UnknownEnvError, match=r"Did you mean Counting-v0\b"):
        gpu_vecenv.make_vec("Countin-v0")
    with pytest.raises(UnknownEnvError, match=r"registered first, with gpu_vecenv.register"):
        gpu_vecenv.make_vec("PointReach-v0")
    with pytest.raises(TypeError, match=r"terminate_a \(did you mean terminate_at\?\)"):
        gpu_vecenv.make_vec("Counting-v0", terminate_a=3.0)
    gym.register("GymOnly-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv")
    try:
        with pytest.raises(UnknownEnvError, match="registered with Gymnasium but not with"):
            gpu_vecenv.make_vec("GymOnly-v0")
    finally:
        del gym.registry["GymOnly-v0"]


MODULE = """
import gpu_vecenv
from tests.runtime.counting_env import COUNTING

gpu_vecenv.register("ModCounting-v0", COUNTING, max_episode_steps=2)
"""


def test_an_id_naming_its_module_imports_it_first(tmp_path, monkeypatch):
    (tmp_path / "my_counting_env.py").write_text(MODULE)
    (tmp_path / "broken_env.py").write_text("import no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        env = gpu_vecenv.make_vec("my_counting_env:ModCounting-v0", 3, device="cpu")
        assert env.max_episode_steps == 2 and env.env_id == "my_counting_env:ModCounting-v0"
        assert gym.make_vec("my_counting_env:ModCounting-v0", num_envs=3).num_envs == 3
    finally:
        sys.modules.pop("my_counting_env", None)
    with pytest.raises(UnknownEnvError, match="cannot import module 'no_such_module'"):
        gpu_vecenv.make_vec("no_such_module:ModCounting-v0")
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency"):  # its own bug
        gpu_vecenv.make_vec("broken_env:Broken-v0")
    with pytest.raises(UnknownEnvError, match="malformed env id"):
        gpu_vecenv.make_vec("a:b:Counting-v0")


def test_a_registered_multi_agent_definition_and_its_views():
    pytest.importorskip("pettingzoo")
    from pettingzoo.test import parallel_api_test

    from gpu_vecenv.adapters.pettingzoo import parallel_env

    gpu_vecenv.register(
        "SmallGrid-v0",
        tag_grid.DEFINITION,
        max_episode_steps=12,
        kwargs={"num_taggers": 2, "grid_length": 4},
    )
    env = gpu_vecenv.make_vec("SmallGrid-v0", 2, device="cpu")
    assert isinstance(env, MultiAgentVectorEnv) and env.num_envs == 2 * 3
    assert (env.params.num_taggers, env.params.episode_length) == (2, 12)
    # the time limit is the params' episode_length: giving that instead is no clash
    assert gym.make_vec("SmallGrid-v0", num_envs=2, episode_length=7).params.episode_length == 7
    assert gym.spec("SmallGrid-v0").max_episode_steps is None
    with pytest.raises(TypeError, match="gpu_vecenv.parallel_env"):
        gym.make("SmallGrid-v0")

    batched = gpu_vecenv.parallel_env("SmallGrid-v0", num_games=2, device="cpu")
    assert batched.possible_agents == ["tagger_0", "tagger_1", "runner_0"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(parallel_env("SmallGrid-v0"), num_cycles=30)


@pytest.mark.parametrize("env_id", ["GPUTag-v0", "GPUTagGrid-v0"])
def test_gymnasium_make_of_a_multi_agent_id_says_what_to_use(env_id):
    with pytest.raises(TypeError) as caught:
        gym.make(env_id)
    message = str(caught.value)
    assert "multi-agent" in message and f"gymnasium.make_vec('{env_id}'" in message
    assert "gpu_vecenv.parallel_env" in message and "adapters.pettingzoo" in message


def test_adapters_take_a_registered_id():
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("torchrl")
    from torchrl.envs.utils import check_env_specs

    from gpu_vecenv.adapters.sb3 import SB3VecEnv
    from gpu_vecenv.adapters.torchrl import TorchRLEnv, TorchRLTagEnv

    register_counting()
    venv = SB3VecEnv("Counting-v0", num_envs=4, device="cpu")
    assert venv.reset().shape == (4, 1)
    venv.step_async(venv.action_space.sample()[None].repeat(4, 0))
    obs, rewards, dones, infos = venv.step_wait()
    assert rewards.shape == (4,) and len(infos) == 4
    check_env_specs(TorchRLEnv("Counting-v0", num_envs=4, device="cpu"), seed=0)
    gpu_vecenv.register("SmallGrid-v0", tag_grid.DEFINITION, kwargs={"num_taggers": 2})
    check_env_specs(TorchRLTagEnv("SmallGrid-v0", num_games=2, device="cpu"), seed=0)


def test_an_env_without_kernels_falls_back_to_torch_under_auto(monkeypatch):
    """A custom env registered without a KernelBinding (or a custom multi-agent env) must
    run on a GPU under backend="auto", as the torch backend, with a notice."""
    from types import SimpleNamespace

    import torch

    from gpu_vecenv import backends
    from gpu_vecenv.backends.compiler import KernelsUnavailable
    from gpu_vecenv.backends.cuda import binding_for
    from gpu_vecenv.multi_agent.cuda_backend import GameCudaBackend

    with pytest.raises(KernelsUnavailable, match="has no CUDA kernels"):
        binding_for(COUNTING)
    custom = SimpleNamespace(
        definition=SimpleNamespace(name="my_game", kernel_binding=None),
        device=torch.device("cuda", 0),
    )
    with pytest.raises(KernelsUnavailable, match="no multi-agent CUDA kernels"):
        GameCudaBackend(custom)

    monkeypatch.setattr(backends, "resolve_backend", lambda backend, device: "cuda")
    monkeypatch.setattr(backends, "_notices_shown", set())
    context = SimpleNamespace(device=torch.device("cuda", 0))
    with pytest.warns(UserWarning, match="using the torch backend .*has no CUDA kernels"):
        name, built = backends.build_backend(
            "auto", context, lambda ctx: binding_for(COUNTING), lambda ctx: ("torch", ctx)
        )
    assert name == "torch" and built == ("torch", context)
    with pytest.raises(KernelsUnavailable):
        backends.build_backend("cuda", context, lambda ctx: binding_for(COUNTING), lambda ctx: None)


FIRST_THING = """
import sys
import gpu_vecenv
gpu_vecenv.make_vec("GPUCartPole-v1", 1, device="cpu")  # imports gymnasium, then the hook runs
import gymnasium
assert "GPUTag-v0" in gymnasium.registry
from tests.runtime.counting_env import COUNTING
gpu_vecenv.register("Counting-v0", COUNTING)
print(gymnasium.make_vec("Counting-v0", num_envs=3, device="cpu").num_envs)
"""


def test_making_an_env_first_thing_in_a_fresh_interpreter_registers_every_id():
    """``gpu_vecenv.make_vec`` imports our registration module, then gymnasium, whose import
    runs the start-up hook, which needs that module: a circular import there would leave
    every id unregistered with Gymnasium (a warning, then "No registered env")."""
    result = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", FIRST_THING],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3"]
