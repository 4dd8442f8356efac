"""``gpu-vecenv train`` / ``eval`` as subprocesses: runs, outputs, resume, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from gpu_vecenv.cli import main as cli_main


def run_cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "gpu_vecenv.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=240)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\n"
                             f"stderr:\n{proc.stderr}")
    return proc


def test_train_then_resume_then_eval(tmp_path):
    run_dir = tmp_path / "run"
    common = ("--device", "cpu", "--no-progress", "--set", "trainer.backend=torch")
    proc = run_cli("train", "--env", "GPUCartPole-v1", "--num-envs", "8", "--total-steps",
                   "512", "--seed", "3", "--run-dir", run_dir, "--set", "ppo.num_steps=16",
                   "--set", "trainer.eval_episodes=3", *common)
    assert "evaluation over 3 episodes" in proc.stdout
    for name in ("config.yaml", "metrics.jsonl", "eval.json", "checkpoints/latest.pt"):
        assert (run_dir / name).is_file(), name
    assert any((run_dir / "tensorboard").iterdir())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    assert rows[-1]["global_step"] == 512 and "policy_loss" in rows[-1]
    assert "seed: 3" in (run_dir / "config.yaml").read_text()

    proc = run_cli("train", "--resume", run_dir, "--total-steps", "1024", *common)
    payload = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert payload["counters"]["global_step"] == 1024

    gif = tmp_path / "episode.gif"
    proc = run_cli("eval", run_dir, "--episodes", "2", "--gif", gif, "--device", "cpu",
                   "--json", tmp_path / "eval.json")
    assert "evaluation over 2 episodes" in proc.stdout
    assert gif.stat().st_size > 1000 and gif.read_bytes()[:3] == b"GIF"
    assert json.loads((tmp_path / "eval.json").read_text())["global_step"] == 1024


@pytest.mark.parametrize(
    "args, message",
    [
        (("train", "--set", "ppo.learnin_rate=1"), "ppo.learnin_rate"),
        (("train", "--env", "GPUCartPol-v1"), "unknown env id"),
        (("train", "--set", "trainer.num_envs=many"), "trainer.num_envs must be an int"),
        (("train", "no_such_config.yaml"), "does not exist"),
        (("eval", "no_such_run"), "neither a run directory nor a checkpoint"),
    ],
)
def test_bad_input_gives_a_clear_error_and_exit_2(args, message, tmp_path, capsys):
    # In-process (the same main() the console script runs) to save interpreter start-ups.
    extra = ["--run-dir", str(tmp_path / "r")] if args[0] == "train" else ["--episodes", "1"]
    assert cli_main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()  # nothing ran


def test_eval_of_a_corrupt_checkpoint_exits_2(tmp_path):
    bad = tmp_path / "latest.pt"
    bad.write_bytes(b"\x00" * 100)
    proc = run_cli("eval", bad, check=False)
    assert proc.returncode == 2 and "corrupt" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_print_config_and_help(capsys):
    assert cli_main(["train", "cartpole_a2c", "--print-config", "--set",
                     "a2c.ent_coef=0.01"]) == 0
    out = capsys.readouterr().out
    assert "algo: a2c" in out and "ent_coef: 0.01" in out
    with pytest.raises(SystemExit):
        cli_main(["train", "--help"])
    out = capsys.readouterr().out
    assert "--ppo.clip_coef" in out and "surrogate clipping epsilon" in out
