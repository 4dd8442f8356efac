"""``trainer.compile_update``: PPO's and A2C's loss compiled with torch.compile trains as
the eager loss does (here through ``aot_eager``, which traces forward and backward as
Inductor does but generates no code; the slow test compiles with Inductor)."""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv.train import compiled_loss
from gpu_vecenv.train.a2c import A2CLearner, a2c_loss
from gpu_vecenv.train.config import A2CConfig, PPOConfig
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.distributions import ActionSpec
from gpu_vecenv.train.ppo import PPOLearner, ppo_minibatch_loss
from gpu_vecenv.train.trainer import Trainer

SPEC = ActionSpec("multidiscrete", nvec=(3, 4), start=(0, 0))
ROWS = 64


@pytest.fixture
def traced(monkeypatch):
    monkeypatch.setattr(compiled_loss, "BACKEND", "aot_eager")
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _rows(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"obs": torch.randn(ROWS, 6, generator=g),
            "actions": torch.stack([torch.randint(0, n, (ROWS,), generator=g)
                                    for n in SPEC.nvec], -1),
            "advantages": torch.randn(ROWS, generator=g),
            "returns": torch.randn(ROWS, generator=g),
            "mask": (torch.rand(ROWS, generator=g) > 0.2).float()}


def _loss_and_grads(learner, loss_fn, *args):
    learner.model.zero_grad()
    loss, stats = loss_fn(learner.model, learner.config, *args)
    loss.backward()
    return [loss.detach(), stats] + [p.grad.clone() for p in learner.model.parameters()]


def _assert_close(eager: list[torch.Tensor], compiled: list[torch.Tensor]) -> None:
    assert len(eager) == len(compiled)
    for a, b in zip(eager, compiled, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("masked", [False, True])
def test_ppo_minibatch_loss_compiled_gives_the_eager_loss_and_gradients(traced, masked):
    config = PPOConfig(num_steps=8, hidden_sizes=[32, 32], activation="relu")
    learner = PPOLearner(config, 6, SPEC, 16, torch.device("cpu"),
                         torch.Generator().manual_seed(0), masked=masked, compile_update=True)
    assert learner.minibatch_loss is not ppo_minibatch_loss
    r = _rows()
    old_log_probs, old_values = r["advantages"] - 2.0, r["returns"].flip(0)
    args = (r["obs"], r["actions"], old_log_probs, r["advantages"], r["returns"], old_values,
            r["mask"] if masked else None)
    _assert_close(_loss_and_grads(learner, ppo_minibatch_loss, *args),
                  _loss_and_grads(learner, learner.minibatch_loss, *args))


def test_a2c_loss_compiled_gives_the_eager_loss_and_gradients(traced):
    config = A2CConfig(num_steps=8, hidden_sizes=[32], activation="tanh")
    learner = A2CLearner(config, 6, SPEC, 8, torch.device("cpu"),
                         torch.Generator().manual_seed(0), masked=True, compile_update=True)
    assert learner.loss is not a2c_loss
    r = _rows(1)
    args = (r["obs"], r["actions"], r["advantages"], r["returns"], r["mask"])
    _assert_close(_loss_and_grads(learner, a2c_loss, *args),
                  _loss_and_grads(learner, learner.loss, *args))


def _run(tmp_path, name: str, algo: str, compile_update: bool) -> list[dict]:
    rows: list[dict] = []
    config = load_config(None, [f"{algo}.num_steps=8", f"{algo}.hidden_sizes=[16]"],
                         env="GPUCartPole-v1", algo=algo, device="cpu", backend="torch",
                         run_dir=str(tmp_path / name), progress=False, tensorboard=False,
                         eval_episodes=0, num_envs=8, total_steps=8 * 8 * 3,
                         checkpoint_interval=0, compile_update=compile_update, seed=3)
    with Trainer(config, callback=rows.append) as trainer:
        trainer.run()
    return rows


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_a_compiled_run_logs_what_the_eager_run_logs(traced, tmp_path, algo):
    eager = _run(tmp_path, "eager", algo, False)
    compiled = _run(tmp_path, "compiled", algo, True)
    assert len(eager) == len(compiled) == 3
    for a, b in zip(eager, compiled, strict=True):
        for key in ("loss", "policy_loss", "value_loss", "entropy", "episode_return"):
            if key in a:
                assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-5), key


def test_ddpg_refuses_compile_update(tmp_path):
    config = load_config(None, [], env="GPUPendulum-v1", algo="ddpg", device="cpu",
                         backend="torch", run_dir=str(tmp_path / "r"), progress=False,
                         tensorboard=False, compile_update=True)
    with pytest.raises(ValueError, match="compile_update compiles ppo's and a2c's loss"):
        Trainer(config)


def test_a_missing_compiler_is_a_clear_error_before_training(tmp_path, monkeypatch):
    monkeypatch.setattr(compiled_loss, "BACKEND", "inductor")
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    with pytest.raises(ValueError, match=r"compile_update: torch.compile on a CPU needs a C\+\+ "
                                         r"compiler \(no-such-compiler-here\), and none"):
        PPOLearner(PPOConfig(num_steps=8, hidden_sizes=[8]), 6, SPEC, 8, torch.device("cpu"),
                   torch.Generator(), compile_update=True)
    monkeypatch.setattr(compiled_loss.importlib.util, "find_spec", lambda name: None)
    assert "needs Triton" in compiled_loss.missing_toolchain(torch.device("cuda"))
    monkeypatch.setattr(compiled_loss, "BACKEND", "aot_eager")  # builds nothing
    assert compiled_loss.missing_toolchain(torch.device("cpu")) is None


@pytest.mark.slow
def test_inductor_compiles_the_ppo_update_of_a_run(tmp_path):
    # The real compiler (C++ code on a CPU): the run trains as the eager one does.
    torch._dynamo.reset()
    eager = _run(tmp_path, "eager", "ppo", False)
    compiled = _run(tmp_path, "compiled", "ppo", True)
    for a, b in zip(eager, compiled, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-3, abs=1e-4)
        assert b["entropy"] == pytest.approx(a["entropy"], rel=1e-4)
