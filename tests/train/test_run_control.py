"""How a run ends and what it shows meanwhile: stop_at_return, Ctrl-C, progress, the
GPU-sized-config warning, TensorBoard tags, per-team summaries (in-process, CPU, tiny)."""

from __future__ import annotations

import io
import json
import os
import signal
import warnings

import pytest
import torch

from gpu_vecenv.train import trainer as trainer_module
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.evaluation import format_evaluation
from gpu_vecenv.train.logger import tensorboard_tag
from gpu_vecenv.train.progress import Progress, format_duration, format_returns
from gpu_vecenv.train.stopping import (
    ReturnWindow,
    TrainingInterrupted,
    threshold_reached,
    thresholds_by_policy,
)
from gpu_vecenv.train.trainer import Trainer

LOSS_KEYS = (
    "loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "episode_return",
    "episodes",
    "global_step",
)


def _cartpole(run_dir, **trainer):
    """PPO on CartPole, 8 envs x 16 steps (128 env steps per iteration), a row each."""
    base = {
        "device": "cpu",
        "backend": "torch",
        "run_dir": str(run_dir),
        "progress": False,
        "tensorboard": False,
        "eval_episodes": 0,
        "checkpoint_interval": 0,
        "num_envs": 8,
        "total_steps": 12_800,
        "log_interval": 1,
    }
    return load_config(None, ["ppo.num_steps=16"], **{**base, **trainer})


def _losses(rows):
    return [{k: v for k, v in r.items() if k in LOSS_KEYS} for r in rows]


def _first_row_solved(rows, threshold, episodes=100):
    """The first row at which the newest rows holding >= ``episodes`` episodes have a
    mean return >= ``threshold`` (worked out here independently of ReturnWindow)."""
    for i in range(len(rows)):
        total = count = 0.0
        for row in reversed(rows[: i + 1]):
            if "episodes" in row:
                total += row["episode_return"] * row["episodes"]
                count += row["episodes"]
            if count >= episodes:
                break
        if count >= episodes and total / count >= threshold:
            return rows[i]
    return None


def test_return_window_keeps_the_newest_rows_holding_100_episodes():
    window = ReturnWindow(episodes=100)
    window.add(10.0, 60)
    assert window.mean() == 10.0 and window.count == 60 and not window.full()
    window.add(20.0, 50)  # 110 episodes; dropping the first would leave 50 < 100
    assert window.count == 110 and window.mean() == pytest.approx((600 + 1000) / 110)
    window.add(30.0, 60)  # the newest two hold 110 >= 100: the oldest row goes
    assert window.count == 110 and window.mean() == pytest.approx((1000 + 1800) / 110)
    window.add(99.0, 0)  # a row without finished episodes changes nothing
    assert window.count == 110
    again = ReturnWindow()
    again.load(window.state())
    assert again.mean() == window.mean() and again.full()


def test_thresholds_fit_the_policies():
    assert thresholds_by_policy(None, ["default"]) == {}
    assert thresholds_by_policy(475, ["default"]) == {"default": 475.0}
    assert thresholds_by_policy({"tagger": 2}, ["tagger", "runner"]) == {"tagger": 2.0}
    with pytest.raises(ValueError, match=r"give a threshold per policy, e\.g\. \{tagger: 5\}"):
        thresholds_by_policy(5.0, ["tagger", "runner"])
    with pytest.raises(ValueError, match="one policy; give a number"):
        thresholds_by_policy({"default": 5.0}, ["default"])
    windows = {"tagger": ReturnWindow(), "runner": ReturnWindow()}
    windows["tagger"].add(3.0, 100)
    windows["runner"].add(-1.0, 100)
    assert threshold_reached(windows, {"tagger": 2.0})
    assert not threshold_reached(windows, {"tagger": 2.0, "runner": 0.0})  # every one


def test_a_float_threshold_on_a_two_policy_run_is_a_clear_error(tmp_path):
    config = load_config(
        None,
        ["trainer.stop_at_return=20"],
        env="GPUTag-v0",
        num_envs=1,
        device="cpu",
        run_dir=str(tmp_path),
        progress=False,
    )
    with pytest.raises(ValueError, match="policies tagger, runner; give a threshold per"):
        Trainer(config)


def test_stop_at_return_stops_at_the_first_solved_row_and_computes_what_the_full_run_does(tmp_path):
    full = Trainer(_cartpole(tmp_path / "full")).run()
    expected = _first_row_solved(full.metrics, 40.0)
    assert expected is not None and expected["global_step"] < full.global_step

    result = Trainer(_cartpole(tmp_path / "stop", stop_at_return=40, eval_episodes=2)).run()
    assert result.stopped == "stop_at_return"
    assert result.global_step == expected["global_step"]
    assert _losses(result.metrics) == _losses(full.metrics[: len(result.metrics)])
    mean, count = result.recent_returns["default"]
    assert mean >= 40 and count >= 100
    # checkpoint and evaluation, as at the normal end
    payload = torch.load(tmp_path / "stop" / "checkpoints" / "latest.pt", weights_only=True)
    assert payload["counters"]["global_step"] == result.global_step
    assert result.evaluation is not None and (tmp_path / "stop" / "eval.json").is_file()


def test_a_run_stopped_at_return_is_finished_until_the_threshold_rises(tmp_path):
    direct = Trainer(_cartpole(tmp_path / "direct", stop_at_return=60)).run()
    assert direct.stopped == "stop_at_return"

    Trainer(_cartpole(tmp_path / "r", stop_at_return=40)).run()
    again = Trainer(_cartpole(tmp_path / "r", stop_at_return=40), resume=True)
    assert again.finished == "stop_at_return"
    with pytest.warns(UserWarning, match="already finished"):
        assert again.run().stopped == "already_finished"
    # Raised to 60, it trains on and stops where a run aimed at 60 from the start stops:
    # the return window travels in the checkpoint.
    resumed = Trainer(_cartpole(tmp_path / "r", stop_at_return=60), resume=True).run()
    assert resumed.stopped == "stop_at_return"
    assert resumed.global_step == direct.global_step
    rows = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").open()]
    assert _losses(rows) == _losses(direct.metrics)


def _wrap_evaluate(monkeypatch, passes):
    """Count the evaluations and let ``passes(call)`` decide each one's outcome: the real
    evaluation is played (its effects on the run are what the tests are about), then its
    mean return is kept or replaced by one far below any threshold."""
    from gpu_vecenv.train import evaluation as evaluation_module

    real, calls = evaluation_module.evaluate, []

    def wrapped(*args, **kwargs):
        result = real(*args, **kwargs)
        calls.append(args[2])  # episodes
        if not passes(len(calls)):
            result = {**result, "mean_return": -1e9}
        return result

    monkeypatch.setattr(evaluation_module, "evaluate", wrapped)
    return calls


def test_a_failed_stop_check_trains_on_exactly_as_without_a_threshold(tmp_path, monkeypatch):
    """Each row whose training mean reaches the threshold plays the check; failing, the run
    goes on, and its rows (the check's own column aside) equal a run without a threshold,
    bit for bit: the check's evaluation changes no RNG, weight or env of the run."""
    rows_of = {"log_interval": 4, "total_steps": 8_192}  # fewer rows: fewer checks
    full = Trainer(_cartpole(tmp_path / "full", **rows_of)).run()
    solved_at = _first_row_solved(full.metrics, 40.0)
    calls = _wrap_evaluate(monkeypatch, passes=lambda call: False)
    result = Trainer(_cartpole(tmp_path / "check", stop_at_return=40, stop_check_episodes=3,
                               **rows_of)).run()
    assert result.stopped == "total_steps" and result.global_step == full.global_step
    assert _losses(result.metrics) == _losses(full.metrics)
    checked = [r for r in result.metrics if "stop_check_return" in r]
    assert checked and checked[0]["global_step"] == solved_at["global_step"]
    assert len(calls) == len(checked) and set(calls) == {3}
    assert all(r["stop_check_return"] == -1e9 for r in checked)
    written = [json.loads(line) for line in (tmp_path / "check" / "metrics.jsonl").open()]
    assert [r for r in written if "stop_check_return" in r] == checked


def test_a_passed_stop_check_stops_and_is_the_final_evaluation(tmp_path, monkeypatch):
    full = Trainer(_cartpole(tmp_path / "full")).run()
    solved_at = _first_row_solved(full.metrics, 40.0)
    later = [r for r in full.metrics if r["global_step"] > solved_at["global_step"]]
    calls = _wrap_evaluate(monkeypatch, passes=lambda call: call >= 2)  # the 2nd passes
    run = _cartpole(tmp_path / "check", stop_at_return=40, stop_check_episodes=4,
                    eval_episodes=4)
    result = Trainer(run).run()
    assert result.stopped == "stop_at_return"
    checked = [r["global_step"] for r in result.metrics if "stop_check_return" in r]
    assert len(checked) == 2 and checked[0] == solved_at["global_step"]
    assert result.global_step == checked[1] and checked[1] in [r["global_step"] for r in later]
    assert _losses(result.metrics) == _losses(full.metrics[: len(result.metrics)])
    assert calls == [4, 4]  # the passing check is the final evaluation, not played again
    assert result.evaluation == json.loads((tmp_path / "check" / "eval.json").read_text())
    assert result.metrics[-1]["stop_check_return"] == result.evaluation["mean_return"]
    # Resumed, the run is finished (the check passed at its last step)...
    again = Trainer(run, resume=True)
    assert again.finished == "stop_at_return"
    # ...but not with another threshold that its training mean reaches unchecked.
    other = _cartpole(tmp_path / "check", stop_at_return=30, stop_check_episodes=4,
                      eval_episodes=4)
    assert Trainer(other, resume=True).finished is None


def test_stop_check_episodes_must_not_be_negative(tmp_path):
    with pytest.raises(ValueError, match="stop_check_episodes"):
        _cartpole(tmp_path / "r", stop_check_episodes=-1)


@pytest.fixture
def terminal_sigint():
    """SIGINT as in a terminal (Python's KeyboardInterrupt handler), also where this
    process was started with SIGINT ignored (a background job of a non-interactive shell,
    nohup: as CI may start it); the previous disposition is put back after the test."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stops_at_an_iteration_boundary_saves_and_resumes_exactly(tmp_path,
                                                                         terminal_sigint):
    full = Trainer(_cartpole(tmp_path / "full", total_steps=1024)).run()

    def ctrl_c(row):
        if row["iteration"] == 3:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(TrainingInterrupted) as info:
        Trainer(_cartpole(tmp_path / "r", total_steps=1024), callback=ctrl_c).run()
    assert info.value.global_step == 3 * 128  # the iteration it arrived in was finished
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    payload = torch.load(info.value.checkpoint, weights_only=True)
    assert payload["counters"] == {"iteration": 3, "global_step": 384}

    Trainer(_cartpole(tmp_path / "r", total_steps=1024), resume=True).run()
    rows = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").open()]
    assert _losses(rows) == _losses(full.metrics)


def test_overwrite_starts_afresh_in_a_used_run_directory(tmp_path):
    Trainer(_cartpole(tmp_path / "r", total_steps=256)).run()
    # the Python API answers in Python terms (the CLI in its flags: test_cli.py)
    with pytest.raises(ValueError, match=r"already holds a run; continue it with resume=True, "
                                         r"start afresh in it with overwrite=True \(deletes "
                                         r"its checkpoints and logs\), or choose another "
                                         r"run_dir$"):
        Trainer(_cartpole(tmp_path / "r", total_steps=256))
    result = Trainer(_cartpole(tmp_path / "r", total_steps=128), overwrite=True).run()
    rows = (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 1 and result.global_step == 128
    with pytest.raises(ValueError, match="not both"):
        Trainer(_cartpole(tmp_path / "r"), resume=True, overwrite=True)


def test_a_directory_left_before_the_first_row_is_free_again(tmp_path):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("trainer: {}\n")
    (run_dir / "metrics.jsonl").write_text("")  # Ctrl-C twice in the first iteration
    Trainer(_cartpole(run_dir, total_steps=128)).run()
    (run_dir / "checkpoints" / "latest.pt").unlink()  # rows but no checkpoint
    with pytest.raises(ValueError, match="stopped before its first checkpoint.*start afresh "
                                         "in it with overwrite=True, or choose another "
                                         "run_dir$"):
        Trainer(_cartpole(run_dir, total_steps=128))
    with pytest.raises(FileNotFoundError, match="start it afresh with overwrite=True$"):
        Trainer(_cartpole(run_dir, total_steps=128), resume=True)


def test_progress_moves_every_iteration_not_every_log_row(tmp_path, monkeypatch):
    steps = []

    class Recorder:
        def __init__(self, *args, **kwargs):
            pass

        def update(self, global_step):
            steps.append(global_step)

        def set_stats(self, rate, returns):
            pass

        def close(self):
            pass

    monkeypatch.setattr(trainer_module, "Progress", Recorder)
    Trainer(_cartpole(tmp_path / "r", total_steps=640, log_interval=100)).run()
    assert steps == [128, 256, 384, 512, 640]


def test_progress_without_a_terminal_prints_plain_lines():
    stream = io.StringIO()  # not a terminal
    progress = Progress(True, 10_000, 0, interval=0.0, stream=stream)
    progress.update(2_500)
    progress.set_stats(1000.0, {"tagger": 1.5, "runner": -0.25})
    progress.update(5_000)
    progress.close()
    first, second = stream.getvalue().splitlines()
    assert first.startswith("step 2,500/10,000 (25%) | ") and "| return - |" in first
    assert second.startswith("step 5,000/10,000 (50%) | ")
    assert "| return tagger 1.50, runner -0.25 | elapsed " in second and "| ETA " in second

    quiet = io.StringIO()
    progress = Progress(True, 10_000, 0, interval=3600.0, stream=quiet)
    progress.update(5_000)
    assert quiet.getvalue() == ""  # within the interval: nothing yet
    disabled = io.StringIO()
    Progress(False, 10_000, 0, interval=0.0, stream=disabled).update(5_000)
    assert disabled.getvalue() == ""
    assert [format_duration(s) for s in (59, 191, 7500)] == ["59s", "3m11s", "2h05m"]
    assert format_returns({"default": 212.44}) == "212.4"
    assert format_returns({"runner": -10.0}) == "runner -10.00"  # a team is named


def test_a_gpu_sized_config_on_the_cpu_warns_once(tmp_path):
    with pytest.warns(UserWarning, match="sized for a GPU .*4,096 vector slots.* on the CPU"):
        Trainer(_cartpole(tmp_path / "big", num_envs=4096))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Trainer(_cartpole(tmp_path / "small"))


def test_a_gpu_sized_tag_config_on_the_cpu_names_the_cpu_config_and_its_measured_time(tmp_path):
    config = load_config("tag_same_speed", [], num_envs=200, device="cpu",
                         run_dir=str(tmp_path / "tag"))
    with pytest.warns(UserWarning, match="sized for a GPU") as caught:
        Trainer(config)
    message = next(str(w.message) for w in caught if "sized for a GPU" in str(w.message))
    assert "200 games x 22 agents" in message and "expect hours" in message
    # what the speed-ratio configs took on an H200 and what that means on 2 CPU cores
    assert "282M agent-steps" in message and "7-10 hours" in message
    assert "gpu-vecenv train tag_cpu" in message and "minutes" in message
    with pytest.warns(UserWarning, match="for a CPU try num_envs"):  # no CPU config: sizes
        Trainer(_cartpole(tmp_path / "big", num_envs=4096))


def test_tensorboard_tags_are_grouped():
    assert tensorboard_tag("episode_return") == "charts/episode_return"
    assert tensorboard_tag("steps_per_second") == "charts/steps_per_second"
    assert tensorboard_tag("policy_loss") == "losses/policy_loss"
    assert tensorboard_tag("tagger/episode_return") == "charts/tagger/episode_return"
    assert tensorboard_tag("runner/critic_loss") == "losses/runner/critic_loss"
    assert tensorboard_tag("iteration") is None and tensorboard_tag("time") is None


def test_a_multi_policy_evaluation_reports_each_team_not_a_joint_mean():
    ev = {
        "episodes": 4,
        "mean_return": 0.1,
        "std_return": 1.0,
        "mean_length": 120.0,
        "policies": {
            "tagger": {"mean_return_per_agent": 9.5, "mean_return_per_game": 95.0},
            "runner": {"mean_return_per_agent": -0.9, "mean_return_per_game": -90.0},
        },
    }
    text = format_evaluation(ev)
    assert "mean return 0.10" not in text and "over 4 games" in text
    assert "tagger: 9.500 per agent, 95.000 per game" in text and "runner: -0.900" in text


def test_after_a_ctrl_c_that_did_not_save_the_cli_says_what_is_left(tmp_path):
    from types import SimpleNamespace

    from gpu_vecenv.train.cli import _what_is_left

    def trainer(saved_step, global_step=512, finished=None):
        return SimpleNamespace(
            saved_step=saved_step, global_step=global_step, finished=finished, run_dir=tmp_path
        )

    assert "the same command starts the run again" in _what_is_left(trainer(None), "R")
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    assert "--run-dir R --overwrite" in _what_is_left(trainer(None), "R")
    assert "checkpoint (step 256) resumes with: gpu-vecenv train --resume R" in _what_is_left(
        trainer(256), "R"
    )
    assert "evaluate it with: gpu-vecenv eval R" in _what_is_left(
        trainer(512, finished="total_steps"), "R"
    )


def test_matmul_precision_holds_while_the_trainer_lives_and_is_restored_by_close(tmp_path):
    before = torch.get_float32_matmul_precision()
    assert before == "highest"  # torch's default; the test would prove nothing otherwise
    with Trainer(_cartpole(tmp_path / "tf32", matmul_precision="high",
                           total_steps=256)) as trainer:
        assert torch.get_float32_matmul_precision() == "high"
        trainer.run()
        assert torch.get_float32_matmul_precision() == "high"
    assert torch.get_float32_matmul_precision() == before
    with pytest.raises(ValueError, match="matmul_precision must be one of"):
        _cartpole(tmp_path / "bad", matmul_precision="tf32")
    # a trainer whose construction fails (its run directory is a file) changes nothing
    (tmp_path / "a_file").write_text("")
    with pytest.raises(Exception, match="a_file"):
        Trainer(_cartpole(tmp_path / "a_file", matmul_precision="high"))
    assert torch.get_float32_matmul_precision() == before
