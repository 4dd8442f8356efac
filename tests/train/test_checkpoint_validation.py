"""Checkpoints and run directories that no run writes are refused at load, naming the
file; what a kill leaves behind (temporary files, a torn metrics line) is tidied."""

from __future__ import annotations

import copy
import json
import warnings

import pytest
import torch

from gpu_vecenv.cli import main as cli_main
from gpu_vecenv.train import checkpoint as ckpt
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.trainer import Trainer


def _config(run_dir, total_steps=64):
    return load_config(None, ["ppo.num_steps=4", "ppo.hidden_sizes=[8]"], device="cpu",
                       backend="torch", run_dir=str(run_dir), progress=False,
                       tensorboard=False, eval_episodes=0, num_envs=4,
                       total_steps=total_steps, checkpoint_interval=2)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run of 4 iterations of 16 steps; its checkpoint's payload."""
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    Trainer(_config(run_dir)).run()
    return run_dir, torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)


def _with(trained, tmp_path, change) -> tuple:
    """A copy of the trained run whose checkpoint is ``change``d (a function of the
    payload); the run directory and its checkpoint path."""
    import shutil

    source, payload = trained
    run_dir = tmp_path / "run"
    shutil.copytree(source, run_dir)
    payload = {k: copy.deepcopy(v) for k, v in payload.items() if k not in ("format", "version")}
    change(payload)
    path = run_dir / "checkpoints" / "latest.pt"
    ckpt.save_checkpoint(payload, path)
    return run_dir, path


def _set(*keys_and_value):
    *keys, value = keys_and_value

    def change(payload):
        node = payload
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value(node[keys[-1]]) if callable(value) else value
    return change


def _nan_at_first(tensor: torch.Tensor) -> torch.Tensor:
    tensor = tensor.clone()
    tensor.view(-1)[0] = float("nan")
    return tensor


@pytest.mark.parametrize("change, message", [
    (_set("policies", "default", "model", "actor.0.weight", _nan_at_first),
     "NaN or infinite values in policies.default.model.actor.0.weight"),
    (_set("policies", "default", "optimizer", "state", 0, "exp_avg",
          lambda t: t.fill_(float("inf"))),
     "NaN or infinite values in policies.default.optimizer.state.0.exp_avg"),
    (_set("env", "obs", _nan_at_first), "NaN or infinite values in env.obs"),
    (_set("counters", "global_step", "lots"), "impossible counters.global_step 'lots'"),
    (_set("counters", "global_step", -5000), "impossible counters.global_step -5000"),
    (_set("counters", "iteration", True), "impossible counters.iteration True"),
    (_set("counters", "global_step", 65), "global_step 65 is not a whole number of iterations"),
    (_set("counters", "iteration", 0), "global_step 64 is not a whole number of iterations"),
    (_set("counters", {"iteration": 4, "global_step": 128}),
     "global_step 128 after 4 iterations of 16 steps"),
    (_set("env", "obs", lambda t: t[:2]), "env.obs has shape (2, 4)"),
    (_set("env", "state", "x", lambda t: t[:2]), "state['x'] has shape (2,)"),
    (_set("policies", {}), "KeyError: 'default'"),
])
def test_a_checkpoint_no_run_writes_is_refused_naming_the_file(trained, tmp_path, change,
                                                              message):
    run_dir, path = _with(trained, tmp_path, change)
    with pytest.raises(ckpt.CheckpointError) as info:
        Trainer(_config(run_dir, total_steps=128), resume=True)
    assert str(path) in str(info.value) and message in str(info.value)


@pytest.mark.parametrize("change, message", [
    (_set("policies", "default", "model", "critic.0.bias", _nan_at_first), "critic.0.bias"),
    (_set("counters", "global_step", -5000), "global_step -5000"),
])
def test_eval_refuses_them_too(trained, tmp_path, capsys, change, message):
    run_dir, path = _with(trained, tmp_path, change)
    assert cli_main(["eval", str(run_dir), "--episodes", "1", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and message in err and "mean return" not in err


def test_an_empty_checkpoint_is_a_clear_error(tmp_path, capsys):
    empty = tmp_path / "latest.pt"
    empty.touch()
    with pytest.raises(ckpt.CheckpointError, match=f"checkpoint {empty} is empty"):
        ckpt.load_checkpoint(empty)
    assert cli_main(["eval", str(empty)]) == 2
    assert "is empty (0 bytes)" in capsys.readouterr().err


def test_first_line_of_an_error_without_a_message():
    assert ckpt.first_line(EOFError()) == "EOFError"
    assert ckpt.first_line(ValueError("\nsecond")) == "ValueError: second"
    assert ckpt.first_line(KeyError("k")) == "KeyError: 'k'"


def test_temporary_files_of_a_killed_save_are_removed_at_the_next_save(tmp_path):
    path = tmp_path / "latest.pt"
    stale = [tmp_path / ".latest.pt.k1ll3d.tmp", tmp_path / ".latest.pt.x.tmp"]
    other = [tmp_path / ".latest.rank1.pt.x.tmp", tmp_path / "notes.tmp"]  # not this file's
    for file in stale + other:
        file.write_bytes(b"partial")
    ckpt.save_checkpoint({"config": {}, "counters": {"iteration": 1, "global_step": 4},
                          "policies": {}}, path)
    assert not any(file.exists() for file in stale)
    assert all(file.exists() for file in other)
    assert ckpt.load_checkpoint(path)["counters"]["global_step"] == 4


def test_a_resume_tidies_temporary_files_and_drops_a_torn_metrics_line(trained, tmp_path):
    run_dir, _ = _with(trained, tmp_path, lambda payload: None)
    stale = run_dir / "checkpoints" / ".latest.pt.k1ll3d.tmp"
    stale.write_bytes(b"partial")
    metrics = run_dir / "metrics.jsonl"
    rows = metrics.read_text()
    metrics.write_text(rows + '{"global_step": 80, "iteration": 5, "lo')  # killed mid-write
    with pytest.warns(UserWarning, match=r"metrics.jsonl: dropped its last line, cut off "
                                         r"mid-write.*global_step\": 80"):
        trainer = Trainer(_config(run_dir, total_steps=128), resume=True)
    assert not stale.exists()
    assert metrics.read_text() == rows
    trainer.run()
    logged = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [row["global_step"] for row in logged] == [16 * i for i in range(1, 9)]


def test_a_whole_last_row_without_its_newline_is_kept(trained, tmp_path):
    run_dir, _ = _with(trained, tmp_path, lambda payload: None)
    metrics = run_dir / "metrics.jsonl"
    rows = metrics.read_text()
    metrics.write_text(rows[:-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is dropped, so nothing to say
        Trainer(_config(run_dir, total_steps=128), resume=True)
    assert metrics.read_text() == rows


def test_a_bad_line_before_the_last_names_file_and_line(trained, tmp_path):
    run_dir, _ = _with(trained, tmp_path, lambda payload: None)
    metrics = run_dir / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    lines[1] = lines[1][:10]
    metrics.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=f"{metrics} line 2 is not a JSON row"):
        Trainer(_config(run_dir, total_steps=128), resume=True)
