"""A run whose training diverges (NaN loss, NaN weights) stops saying so, not with the
env's invalid-action error, and saves nothing after it."""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv.actions import InvalidActionError
from gpu_vecenv.cli import main as cli_main
from gpu_vecenv.train import TrainingDiverged
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.divergence import check_finite
from gpu_vecenv.train.trainer import Trainer


def _trainer(run_dir, log_interval=1, env="GPUCartPole-v1", **trainer):
    config = load_config(None, ["ppo.num_steps=4", "ppo.hidden_sizes=[8]"], env=env,
                         device="cpu", backend="torch", run_dir=str(run_dir), progress=False,
                         tensorboard=False, eval_episodes=0, num_envs=4, total_steps=4 * 4 * 6,
                         checkpoint_interval=1, log_interval=log_interval, **trainer)
    return Trainer(config)


def _poison(trainer: Trainer, after_iteration: int) -> None:
    """Set one weight to NaN in the update of iteration ``after_iteration`` (1-based)."""
    learner = trainer.groups[0].learner
    update = learner.update

    def poisoned_update():
        metrics = update()
        if trainer.iteration + 1 == after_iteration:  # the loop counts it after the update
            with torch.no_grad():
                learner.model.actor[0].weight[0, 0] = float("nan")
        return metrics

    learner.update = poisoned_update


@pytest.mark.parametrize("env", ["GPUCartPole-v1", "GPUPendulum-v1"])
def test_nan_weights_stop_at_the_row_naming_them(tmp_path, env):
    trainer = _trainer(tmp_path / "r", env=env)
    _poison(trainer, after_iteration=2)
    with pytest.raises(TrainingDiverged) as info:
        trainer.run()
    message = str(info.value)
    assert "training diverged at step 32" in message
    assert "weights not finite: actor.0.weight" in message
    assert "not in range" not in message
    # The checkpoint is the one before: nothing NaN was saved.
    saved = torch.load(tmp_path / "r" / "checkpoints" / "latest.pt", weights_only=True)
    assert saved["counters"]["global_step"] == 16
    assert all(t.isfinite().all() for t in saved["policies"]["default"]["model"].values())


def test_nan_weights_between_rows_are_blamed_when_the_env_refuses_the_actions(tmp_path):
    # log_interval 3: the next roll-out hits the NaN policy before a row is logged; on
    # the CPU the env refuses its actions at once.
    trainer = _trainer(tmp_path / "r", log_interval=3)
    _poison(trainer, after_iteration=1)
    with pytest.raises(TrainingDiverged) as info:
        trainer.run()
    assert isinstance(info.value.__cause__, InvalidActionError)
    assert "weights not finite: actor.0.weight" in str(info.value)
    assert "InvalidActionError" in str(info.value)  # what failed next, as the symptom


def test_an_error_with_finite_weights_is_left_alone(tmp_path):
    trainer = _trainer(tmp_path / "r")

    def broken_update():
        raise RuntimeError("not a divergence")

    trainer.groups[0].learner.update = broken_update
    with pytest.raises(RuntimeError, match="not a divergence") as info:
        trainer.run()
    assert not isinstance(info.value, TrainingDiverged)


def test_a_nan_loss_is_named(tmp_path):
    trainer = _trainer(tmp_path / "r")
    metrics = {"default": {"loss": torch.tensor(float("nan")), "entropy": torch.tensor(0.5),
                           "value_loss": torch.tensor(float("inf"))}}
    with pytest.raises(TrainingDiverged, match=r"policy 'default': loss nan, value_loss inf"):
        check_finite(trainer.groups, metrics, "at step 0")
    metrics["default"] = {"loss": torch.tensor(1.0), "explained_variance": torch.tensor(
        float("nan"))}  # not a loss: a roll-out of equal returns has no variance
    check_finite(trainer.groups, metrics, "at step 0")


def test_the_cli_reports_a_diverged_run_in_one_line(tmp_path, capsys):
    code = cli_main(["train", "--device", "cpu", "--no-progress", "--num-envs", "8",
                     "--total-steps", "1024", "--run-dir", str(tmp_path / "r"),
                     "--set", "ppo.learning_rate=1e30", "--set", "ppo.anneal_lr=false",
                     "--set", "trainer.tensorboard=false", "--set", "trainer.eval_episodes=0"])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and "Traceback" not in err
    assert len(errors) == 1 and errors[0].startswith("gpu-vecenv train: error: training "
                                                     "diverged at step")


def test_a_row_queues_the_check_before_it_waits_for_the_device(tmp_path, monkeypatch):
    # On a GPU the check's kernels then run behind the row's iterations and its host work
    # overlaps them; only its one bool is read after the wait.
    import gpu_vecenv.train.trainer as trainer_module

    calls = []
    flag, wait = trainer_module.finite_flag, trainer_module.wait_for_device
    monkeypatch.setattr(trainer_module, "finite_flag",
                        lambda *a: calls.append("queue check") or flag(*a))
    monkeypatch.setattr(trainer_module, "wait_for_device",
                        lambda *a: calls.append("wait") or wait(*a))
    _trainer(tmp_path / "r").run()
    assert calls[:2] == ["queue check", "wait"] and len(calls) == 12  # 6 rows
