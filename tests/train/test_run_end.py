"""How runs end: SIGTERM like Ctrl-C, ranks that stop after the same iteration, a global
batch split over the ranks, and leaving the process group within a time limit.

Data-parallel cases run 2 ranks on the CPU (gloo) as plain processes
(:class:`tests.train.ranks.Ranks`), each launch with a hard time limit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import torch
import yaml

from gpu_vecenv.train import checkpoint as ckpt
from gpu_vecenv.train import distributed
from gpu_vecenv.train.stopping import DUPLICATE_SIGTERM_S, Interrupted, InterruptRequest
from tests.train.ranks import ROOT, Ranks, wait_for

LIMIT_S = 120
ITERATIONS = 250
TRAIN = ["-m", "gpu_vecenv.train", "cartpole_ppo", "--device", "cpu", "--no-progress",
         "--num-envs", "4", "--set", "trainer.backend=torch", "--set", "ppo.num_steps=8",
         "--set", "ppo.hidden_sizes=[16]", "--set", "ppo.update_epochs=1",
         "--set", "ppo.num_minibatches=1", "--set", "trainer.log_interval=1",
         "--set", "trainer.checkpoint_interval=0", "--set", "trainer.eval_episodes=0",
         "--set", "trainer.tensorboard=false", "--set", "trainer.stop_at_return=null"]


def rows(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def losses(run) -> list[tuple]:
    return [(r["global_step"], r["loss"], r["policy_loss"], r["value_loss"]) for r in rows(run)]


def weights(path) -> dict[str, torch.Tensor]:
    return ckpt.load_checkpoint(path)["policies"]["default"]["model"]


def same_weights(a, b) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """A 2-rank run of ITERATIONS iterations, start to end."""
    run = tmp_path_factory.mktemp("full") / "run"
    ranks = Ranks(*TRAIN, "--total-steps", str(2 * 4 * 8 * ITERATIONS), "--run-dir", str(run))
    assert ranks.wait(LIMIT_S) == [0, 0], ranks.output()
    return run


def test_sigterm_on_one_rank_stops_every_rank_after_the_same_iteration_and_resumes_exactly(
        tmp_path, uninterrupted):
    run = tmp_path / "run"
    args = [*TRAIN, "--total-steps", str(2 * 4 * 8 * ITERATIONS), "--run-dir", str(run)]
    ranks = Ranks(*args)
    wait_for(lambda: (run / "metrics.jsonl").is_file() and len(rows(run)) >= 3, LIMIT_S,
             "three logged rows")
    ranks.send(1, signal.SIGTERM)  # one rank only: it must take the other along
    assert ranks.wait(LIMIT_S) == [143, 143], ranks.output()
    said = ranks.stderr(0)
    assert said.count("resume with: torchrun --nproc-per-node 2 -m gpu_vecenv.train "
                      f"--resume {run}") == 1, ranks.output()
    assert "resume with" not in ranks.stderr(1) + ranks.stdout(1)
    assert "SIGTERM: saving a checkpoint" not in said  # rank 0 got no signal itself
    stopped = [ckpt.load_checkpoint(run / "checkpoints" / name)["counters"]
               for name in ("latest.pt", "latest.rank1.pt")]
    assert stopped[0] == stopped[1] and 3 <= stopped[0]["iteration"] < ITERATIONS

    resumed = Ranks(*args[:2], "--resume", str(run), "--no-progress")
    assert resumed.wait(LIMIT_S) == [0, 0], resumed.output()
    for name in ("latest.pt", "latest.rank1.pt"):
        assert same_weights(run / "checkpoints" / name, uninterrupted / "checkpoints" / name)
    assert losses(run) == losses(uninterrupted)


def test_sigterm_on_a_single_process_run_saves_says_how_to_resume_and_exits_143(tmp_path):
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, *TRAIN, "--total-steps", str(4 * 8 * 100_000),
                             "--run-dir", str(run)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        wait_for(lambda: (run / "metrics.jsonl").is_file() and len(rows(run)) >= 2, LIMIT_S,
                 "two logged rows")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=LIMIT_S)
    finally:
        proc.kill()
    assert proc.returncode == 143, out + err
    assert "SIGTERM: saving a checkpoint at the end of this iteration" in err
    assert err.count(f"resume with: gpu-vecenv train --resume {run}") == 1, err
    saved = ckpt.load_checkpoint(run / "checkpoints" / "latest.pt")["counters"]
    assert saved["iteration"] == rows(run)[-1]["iteration"]


def test_a_second_signal_quits_at_once_but_a_duplicate_sigterm_is_the_same_request(
        monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("gpu_vecenv.train.stopping.time.monotonic", lambda: clock[0])
    with InterruptRequest(quiet=True) as request:
        os.kill(os.getpid(), signal.SIGTERM)
        assert request.requested and request.signum == signal.SIGTERM
        clock[0] += DUPLICATE_SIGTERM_S / 2  # a scheduler's and torchrun's SIGTERM
        os.kill(os.getpid(), signal.SIGTERM)
        assert request.requested
        clock[0] += DUPLICATE_SIGTERM_S
        with pytest.raises(Interrupted) as info:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs between bytecodes
                pass
        assert info.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back


def test_the_global_batch_is_split_over_the_ranks(tmp_path):
    run = tmp_path / "run"
    args = [a for a in TRAIN if a not in ("--num-envs", "4")]
    ranks = Ranks(*args, "--global-num-envs", "8", "--total-steps", str(8 * 8 * 3),
                  "--run-dir", str(run))
    assert ranks.wait(LIMIT_S) == [0, 0], ranks.output()
    assert "4 slots per rank" in ranks.stdout(0)
    saved = yaml.safe_load((run / "config.yaml").read_text())["trainer"]
    assert (saved["num_envs"], saved["num_envs_global"]) == (4, 8)
    assert [r["global_step"] for r in rows(run)] == [64, 128, 192]

    uneven = Ranks(*args, "--global-num-envs", "7", "--run-dir", str(tmp_path / "uneven"))
    assert uneven.wait(LIMIT_S) == [2, 2], uneven.output()
    assert ("trainer.num_envs_global=7 does not split evenly over 2 ranks; use a multiple "
            "of 2 (e.g. 6 or 8)") in uneven.stderr(0)


def test_global_and_per_rank_envs_are_one_or_the_other(tmp_path, capsys):
    from gpu_vecenv.cli import main

    assert main(["train", "--num-envs", "4", "--global-num-envs", "8",
                 "--run-dir", str(tmp_path / "r")]) == 2
    assert "give --num-envs (per GPU) or --global-num-envs" in capsys.readouterr().err
    assert distributed.envs_per_rank(16, 4) == 4
    with pytest.raises(ValueError, match="e.g. 4 or 6"):
        distributed.envs_per_rank(5, 2)
    with pytest.raises(ValueError, match="does not split evenly over 4 ranks"):
        distributed.envs_per_rank(2, 4)


HANGING_SHUTDOWN = """
import sys, time
import torch.distributed as dist
dist.destroy_process_group = lambda *args, **kwargs: time.sleep(3600)
from gpu_vecenv.cli import main
sys.exit(main(["train", *sys.argv[1:]]))
"""


def test_leaving_the_process_group_is_bounded(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(HANGING_SHUTDOWN)
    args = [a for a in TRAIN if a not in ("-m", "gpu_vecenv.train")]
    ranks = Ranks(str(script), *args, "--total-steps", str(4 * 8 * 2), "--run-dir",
                  str(tmp_path / "run"), processes=1,
                  env={distributed.SHUTDOWN_TIMEOUT_ENV: "1"})
    assert ranks.wait(LIMIT_S) == [3], ranks.output()
    assert "done: 64 env steps" in ranks.stdout(0)
    assert ranks.stderr(0).count("could not leave the process group within 1 s") == 1
