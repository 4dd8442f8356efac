"""``gpu-vecenv train`` / ``eval`` as subprocesses: runs, outputs, resume, clear errors."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

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
    assert _tensorboard_tags(run_dir) >= {"charts/episode_return", "charts/steps_per_second",
                                          "losses/policy_loss", "losses/value_loss"}
    assert not _tensorboard_tags(run_dir) & {"iteration", "time", "episode_return"}
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


def _tensorboard_tags(run_dir) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return set(events.Tags()["scalars"])


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
    # Short and true: the main options, no dataclass defaults, tuples or reST markup.
    assert len(out.splitlines()) <= 60, out
    assert "--help-config" in out and "--overwrite" in out and "gpu-vecenv configs" in out
    assert "--ppo.clip_coef" not in out and "(64, 64)" not in out and "``" not in out
    assert "default: 64" not in out and "(default: 64)" not in out


def test_help_config_shows_the_values_this_command_would_use(capsys):
    assert cli_main(["train", "--help-config"]) == 0
    out = capsys.readouterr().out
    # --env GPUCartPole-v1 uses cartpole_ppo.yaml: 16 envs, not the dataclass's 64
    assert "trainer.num_envs = 16  (int or {auto}; built-in default 64)" in out
    assert "trainer.stop_at_return = 475.0" in out
    assert "ppo.hidden_sizes = [64, 64]" in out and "surrogate clipping epsilon" in out
    assert "``" not in out and "(64, 64)" not in out and "ddpg.tau" not in out
    assert cli_main(["train", "--env", "GPUPendulum-v1", "--help-config"]) == 0
    out = capsys.readouterr().out
    assert "ddpg.tau = 0.005" in out and "trainer.num_envs = 16" in out


@pytest.mark.parametrize("command", ["train", "eval", "bench", "compile", "configs", "list"])
def test_help_shows_no_rest_markup(command, capsys):
    with pytest.raises(SystemExit):
        cli_main([command, "--help"])
    out = capsys.readouterr().out
    assert "`" not in out and f"gpu-vecenv {command}" in out


def test_version(capsys):
    from gpu_vecenv import __version__

    with pytest.raises(SystemExit) as info:
        cli_main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith(f"gpu-vecenv {__version__} (torch ")


def test_configs_lists_every_shipped_config(capsys):
    from gpu_vecenv.train.shipped_configs import shipped_config_names

    assert cli_main(["configs"]) == 0
    out = capsys.readouterr().out
    for name in shipped_config_names():
        assert f"\n{name} " in out
    assert "stops at return 475" in out and "default of --env GPUCartPole-v1" in out


@pytest.mark.parametrize(
    "config, message",
    [
        ("nosuchconfig", "shipped configs: acrobot_ppo, cartpole_a2c, cartpole_ppo"),
        ("cartpole", "did you mean cartpole_ppo?"),
        ("cartpol_a2c.yaml", "did you mean cartpole_a2c?"),
    ],
)
def test_unknown_config_name_lists_the_shipped_ones(config, message, capsys):
    assert cli_main(["train", config]) == 2
    err = capsys.readouterr().err
    assert message in err and "does not exist" in err and len(err.splitlines()) == 1


def _wait_for(predicate, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate()
            raise AssertionError(f"gave up waiting (exit {proc.returncode})\n{out}\n{err}")
        time.sleep(0.1)


def test_ctrl_c_saves_and_the_printed_command_resumes(tmp_path):
    run_dir = tmp_path / "my run"  # a space: the printed command must quote it
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpu_vecenv.cli", "train", "--env", "GPUCartPole-v1",
         "--num-envs", "4", "--total-steps", "100000000", "--device", "cpu", "--run-dir",
         str(run_dir), "--set", "ppo.num_steps=8", "--set", "ppo.hidden_sizes=[8]",
         "--set", "trainer.log_interval=1", "--set", "trainer.tensorboard=false",
         "--set", "trainer.eval_episodes=0", "--set", "trainer.stop_at_return=null"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # SIGINT as in a terminal, also where this process runs with it ignored (a
        # background job of a non-interactive shell, nohup: as CI may start it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    metrics = run_dir / "metrics.jsonl"
    _wait_for(lambda: metrics.is_file() and metrics.read_text().count("\n") >= 2, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    step = torch.load(run_dir / "checkpoints" / "latest.pt",
                      weights_only=True)["counters"]["global_step"]
    assert step >= 64 and f"interrupted at step {step:,} " in err
    command = next(line for line in err.splitlines() if line.startswith("resume with: "))
    argv = shlex.split(command[len("resume with: "):])
    assert argv[:3] == ["gpu-vecenv", "train", "--resume"] and argv[3] == str(run_dir)

    # The printed command, run longer than the interrupted step, continues from it ...
    proc = run_cli(*argv[1:], "--total-steps", step + 64)
    assert f"resuming {run_dir} from step {step:,} " in proc.stdout
    assert ("done: 64 env steps this session, in " in proc.stdout
            and f"; the run is at step {step + 64:,} (resumed at {step:,})\n" in proc.stdout)
    # ... and once more says the run is finished instead of training or evaluating again.
    proc = run_cli(*argv[1:], "--total-steps", step + 64)
    assert "is already finished" in proc.stdout and "done:" not in proc.stdout
    assert "--total-steps" in proc.stdout  # how to train longer


def test_main_job_without_a_tty_prints_progress_lines_and_stops_when_solved(tmp_path):
    """The README's main job, shrunk: stderr is a pipe (as under nohup, tee or CI), so
    progress comes as plain lines; a low stop_at_return ends the run early, says so,
    then checkpoints and evaluates as at the normal end."""
    run_dir = tmp_path / "run"
    proc = run_cli("train", "--env", "GPUCartPole-v1", "--num-envs", "8", "--device", "cpu",
                   "--run-dir", run_dir, "--set", "ppo.num_steps=16",
                   "--set", "trainer.log_interval=1",
                   "--set", "trainer.stop_at_return=30", "--set", "trainer.progress_interval=0",
                   "--set", "trainer.eval_episodes=2", "--set", "trainer.tensorboard=false")
    lines = [line for line in proc.stderr.splitlines() if line.startswith("step ")]
    pattern = re.compile(r"step ([\d,]+)/499,968 \(\d+%\) \| [\d,]+ steps/s \| "
                         r"return (-|[\d.]+) \| elapsed \d+s \| ETA \S+$")
    assert len(lines) >= 3 and all(pattern.match(line) for line in lines), proc.stderr
    steps = [int(pattern.match(line).group(1).replace(",", "")) for line in lines]
    assert steps == sorted(steps) and steps[0] == 128  # one line per iteration here

    solved = re.search(r"solved: mean return ([\d.]+) over the last (\d+) episodes >= 30 at "
                       r"step ([\d,]+) \(of total_steps 500,000\)", proc.stdout)
    assert solved, proc.stdout
    assert float(solved.group(1)) >= 30 and int(solved.group(2)) >= 100
    step = int(solved.group(3).replace(",", ""))
    assert step < 100_000 and f"done: {step:,} env steps" in proc.stdout
    assert "evaluation over 2 episodes" in proc.stdout and (run_dir / "eval.json").is_file()
    payload = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert payload["counters"]["global_step"] == step


def test_no_progress_prints_no_progress_lines(tmp_path):
    proc = run_cli("train", "--num-envs", "4", "--total-steps", "256", "--device", "cpu",
                   "--run-dir", tmp_path / "r", "--no-progress", "--set", "ppo.num_steps=8",
                   "--set", "trainer.progress_interval=0", "--set", "trainer.eval_episodes=0")
    assert "step " not in proc.stderr and "done: 256 env steps" in proc.stdout


def test_the_summary_line_counts_this_sessions_steps():
    from gpu_vecenv.train.cli import _done_line
    from gpu_vecenv.train.trainer import TrainResult

    result = TrainResult(Path("r"), 1_200_000, 2.0, [], None)
    assert _done_line(result, None) == "done: 1,200,000 env steps in 2.0 s (600,000 env-steps/s)"
    assert _done_line(result, 1_000_000) == (
        "done: 200,000 env steps this session, in 2.0 s (100,000 env-steps/s); the run is at "
        "step 1,200,000 (resumed at 1,000,000)")


def test_overwrite_reuses_a_run_directory(tmp_path, capsys):
    # In-process: four runs, no interpreter start-ups.
    run_dir = tmp_path / "r"
    args = ["train", "--num-envs", "4", "--total-steps", "64", "--device", "cpu",
            "--run-dir", str(run_dir), "--no-progress", "--set", "ppo.num_steps=8",
            "--set", "trainer.eval_episodes=0", "--set", "trainer.tensorboard=false",
            "--set", "trainer.log_interval=1"]
    assert cli_main(args) == 0
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert f"continue it with --resume {run_dir}, start afresh in it with --overwrite" in err
    assert "or choose another --run-dir" in err and "=True" not in err
    assert len(err.splitlines()) == 1
    assert cli_main([*args, "--overwrite", "--seed", "5"]) == 0
    assert (run_dir / "metrics.jsonl").read_text().count("\n") == 2  # only the new run's
    assert "seed: 5" in (run_dir / "config.yaml").read_text()
    assert cli_main(["train", "--resume", str(run_dir), "--overwrite"]) == 2
    assert "not both" in capsys.readouterr().err
    (run_dir / "checkpoints" / "latest.pt").unlink()  # logged rows, no checkpoint
    assert cli_main(args) == 2
    assert capsys.readouterr().err.endswith(
        "cannot be resumed; start afresh in it with --overwrite, or choose another --run-dir\n")
    assert cli_main(["train", "--resume", str(run_dir)]) == 2
    assert capsys.readouterr().err.endswith("start it afresh with --overwrite\n")
