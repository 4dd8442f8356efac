"""The ``Learner`` contract: every algorithm offers the same methods with the same
signatures (the loop calls them without knowing which it drives), and the timing windows
of the logger add up and restart at each read."""

from __future__ import annotations

import inspect

import pytest

from gpu_vecenv.train.a2c import A2CLearner
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.ddpg import DDPGLearner
from gpu_vecenv.train.fused_ppo_learner import FusedPPOLearner
from gpu_vecenv.train.learner import Learner
from gpu_vecenv.train.logger import IterationTimer
from gpu_vecenv.train.ppo import PPOLearner
from gpu_vecenv.train.trainer import Trainer

METHODS = ("begin_iteration", "act", "record", "ready", "update", "state_dict",
           "load_state_dict")


@pytest.mark.parametrize("cls", [PPOLearner, FusedPPOLearner, A2CLearner, DDPGLearner])
def test_every_learner_has_the_protocols_signatures(cls):
    for name in METHODS:
        expected = list(inspect.signature(getattr(Learner, name)).parameters)
        assert list(inspect.signature(getattr(cls, name)).parameters) == expected, name


@pytest.mark.parametrize("algo, env, cls, steps", [
    ("ppo", "GPUCartPole-v1", PPOLearner, 32), ("a2c", "GPUCartPole-v1", A2CLearner, 5),
    ("ddpg", "GPUPendulum-v1", DDPGLearner, 1)])
def test_the_trainer_builds_the_algorithms_learner(tmp_path, algo, env, cls, steps):
    t = Trainer(load_config(None, [], env=env, algo=algo, device="cpu", num_envs=2,
                            run_dir=str(tmp_path), progress=False, tensorboard=False))
    learner = t.groups[0].learner
    assert type(learner) is cls  # on the CPU: no fused kernels
    assert t.steps_per_iteration == learner.steps_per_iteration == steps


def test_ddpg_is_ready_after_learning_starts_with_a_batch_in_the_buffer(tmp_path):
    t = Trainer(load_config(None, ["ddpg.learning_starts=6", "ddpg.batch_size=4"],
                            env="GPUPendulum-v1", algo="ddpg", device="cpu", num_envs=2,
                            run_dir=str(tmp_path), progress=False, tensorboard=False))
    learner = t.groups[0].learner
    learner.begin_iteration(0, 0.0)
    assert learner.warming_up
    t._collect()
    assert not learner.ready(6)  # 2 rows in the buffer, batch_size 4
    t._collect()
    assert not learner.ready(4) and learner.ready(6)
    learner.begin_iteration(6, 0.5)
    assert not learner.warming_up


def test_iteration_timer_windows():
    synced = []
    timer = IterationTimer(100, sync=lambda: synced.append(True))
    for _ in range(2):
        with timer.phase("rollout"):
            pass
        with timer.phase("update"):
            pass
    assert len(synced) == 4
    row = timer.read(300)
    assert list(row) == ["time", "steps_per_second", "rollout_seconds", "update_seconds"]
    assert row["rollout_seconds"] > 0 and row["update_seconds"] > 0
    assert row["steps_per_second"] > 0 and row["time"] <= timer.elapsed()
    again = timer.read(300)  # a new window: nothing timed, no steps
    assert again["rollout_seconds"] == again["update_seconds"] == 0.0
    assert again["steps_per_second"] == 0.0


@pytest.mark.parametrize("precision", ["highest", "high"])
def test_the_fused_kernels_get_the_configs_matmul_precision(tmp_path, monkeypatch, precision):
    """The trainer sets torch's matmul precision only after building its learners, so the
    config's reaches the fused learner explicitly (here with the kernels stubbed on a CPU)."""
    from gpu_vecenv.train import fused_ppo_learner, ppo_mlp_kernels

    seen = []

    class Recorded(PPOLearner):
        def __init__(self, *args, matmul_precision=None):
            seen.append(ppo_mlp_kernels.mma_precision(matmul_precision))
            super().__init__(*args)

    monkeypatch.setattr(fused_ppo_learner, "FusedPPOLearner", Recorded)
    monkeypatch.setattr(fused_ppo_learner, "fused_kernels_apply", lambda *a, **k: True)
    Trainer(load_config(None, ["trainer.matmul_precision=" + precision], device="cpu",
                        num_envs=2, run_dir=str(tmp_path), progress=False, tensorboard=False))
    assert seen == [ppo_mlp_kernels.MMA_PRECISIONS[precision]]
