"""Data-parallel runs on the GPUs: NCCL, the CUDA kernels, CUDA graphs whose update holds
the all-reduces, fused PPO kernels. Two ranks wherever two GPUs are visible (one
otherwise), each launch with a hard time limit: a run that does not end fails with the
ranks' last output.

What is checked is how runs *end* (every way a run can end, with status 0 when it
succeeded): a process group destroyed while a CUDA graph that captured its all-reduces
was alive used to hang every 2-rank run after its last checkpoint.
"""

from __future__ import annotations

import json
import signal
import time

import pytest
import torch
import yaml

from gpu_vecenv.train import checkpoint as ckpt
from tests.train.ranks import Ranks, torchrun, wait_for

pytestmark = pytest.mark.gpu
LIMIT_S = 240
COMMON = ["--no-progress", "--set", "trainer.tensorboard=false"]


def processes() -> int:
    return min(2, torch.cuda.device_count())


def rows(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def ranks_agree(run, n: int) -> None:
    """Every rank's checkpoint: the same counters and weights."""
    files = ["latest.pt", *(f"latest.rank{r}.pt" for r in range(1, n))]
    payloads = [ckpt.load_checkpoint(run / "checkpoints" / f) for f in files]
    for p in payloads[1:]:
        assert p["counters"] == payloads[0]["counters"]
        for name, policy in p["policies"].items():
            model, first = policy["model"], payloads[0]["policies"][name]["model"]
            assert model.keys() == first.keys()
            assert all(torch.equal(model[k], first[k]) for k in model)


def train(run, *args: str, n: int | None = None) -> Ranks:
    return Ranks("-m", "gpu_vecenv.train", *args, "--run-dir", str(run), *COMMON,
                 processes=n or processes())


@pytest.mark.parametrize("graphs,fused", [("true", "true"), ("false", "false")])
def test_a_run_ends_at_total_steps(tmp_path, graphs, fused):
    n = processes()
    run = tmp_path / "run"
    ranks = train(run, "cartpole_ppo", "--num-envs", "256", "--total-steps",
                  str(n * 256 * 32 * 8), "--set", f"trainer.cuda_graphs={graphs}",
                  "--set", f"trainer.fused_kernels={fused}", "--set",
                  "trainer.stop_at_return=null", "--set", "trainer.log_interval=1",
                  "--set", "trainer.eval_episodes=0")
    assert ranks.wait(LIMIT_S) == [0] * n, ranks.output()
    # Every rank exited within seconds of the last write (the checkpoint).
    after_last_write = time.time() - (run / "checkpoints" / "latest.pt").stat().st_mtime
    assert after_last_write < 20, ranks.output()
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["distributed"] == {"world_size": n, "backend": "nccl"}
    assert len(rows(run)) == 8 and all(r["loss"] == r["loss"] for r in rows(run))
    ranks_agree(run, n)
    assert "done: " in ranks.stdout(0)
    print(f"{n} ranks, graphs {graphs}: exited {after_last_write:.1f} s after the last write")


def test_an_early_stop_is_agreed_by_every_rank_and_rank_0_evaluates(tmp_path):
    n = processes()
    run = tmp_path / "run"
    ranks = train(run, "cartpole_ppo", "--set", "trainer.eval_episodes=20")
    assert ranks.wait(LIMIT_S) == [0] * n, ranks.output()
    out = ranks.stdout(0)
    assert "solved: mean return" in out and "evaluation over 20 episodes" in out
    assert all(ranks.stdout(r) == "" for r in range(1, n))
    assert json.loads((run / "eval.json").read_text())["episodes"] == 20
    ranks_agree(run, n)


@pytest.mark.parametrize("config,steps", [("cartpole_a2c", 200_000),
                                          ("pendulum_ddpg", 20_000),
                                          ("tag_ppo", 0)])
def test_a2c_ddpg_and_tag_runs_end(tmp_path, config, steps):
    n = processes()
    run = tmp_path / "run"
    extra = (["--num-envs", "4", "--total-steps", str(n * 4 * 110 * 32 * 3)]
             if config == "tag_ppo" else ["--total-steps", str(steps)])
    ranks = train(run, config, *extra, "--set", "trainer.stop_at_return=null",
                  "--set", "trainer.eval_episodes=2")
    assert ranks.wait(LIMIT_S) == [0] * n, ranks.output()
    ranks_agree(run, n)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_every_rank_saves_and_the_run_resumes(tmp_path, signum):
    n = processes()
    run = tmp_path / "run"
    args = ["cartpole_ppo", "--num-envs", "256", "--total-steps", str(10**9), "--set",
            "trainer.stop_at_return=null", "--set", "trainer.log_interval=1"]
    ranks = train(run, *args)
    wait_for(lambda: (run / "metrics.jsonl").is_file() and len(rows(run)) >= 5, LIMIT_S,
             "five logged rows")
    for r in range(n):  # as a scheduler, or torchrun passing on Ctrl-C, does
        ranks.send(r, signum)
    assert ranks.wait(LIMIT_S) == [128 + signum] * n, ranks.output()
    assert ranks.stderr(0).count(f"--resume {run}") == 1
    ranks_agree(run, n)
    stopped = ckpt.load_checkpoint(run / "checkpoints" / "latest.pt")["counters"]
    resumed = Ranks("-m", "gpu_vecenv.train", "--resume", str(run), "--total-steps",
                    str(stopped["global_step"] + n * 256 * 32 * 4), "--no-progress",
                    processes=n)
    assert resumed.wait(LIMIT_S) == [0] * n, resumed.output()
    assert f"resuming {run} from step {stopped['global_step']:,}" in resumed.stdout(0)
    ranks_agree(run, n)


FAILING_RANK = """
import os, sys
from gpu_vecenv.train import graphs
if os.environ["RANK"] == "1":  # rank 1 fails in its 5th update, after the capture
    update = graphs.GraphedLoop.update
    def failing(self):
        if self.iterations == 4:
            raise RuntimeError("rank 1 fails on purpose")
        return update(self)
    graphs.GraphedLoop.update = failing
from gpu_vecenv.cli import main
sys.exit(main(["train", *sys.argv[1:]]))
"""


def test_a_failing_rank_ends_the_job_with_its_error_printed_once(tmp_path):
    if processes() < 2:
        pytest.skip("needs 2 GPUs: one rank fails, the other must stop")
    script = tmp_path / "failing_rank.py"
    script.write_text(FAILING_RANK)
    start = time.monotonic()
    done = torchrun(str(script), "cartpole_ppo", "--num-envs", "256", "--total-steps",
                    str(10**9), "--run-dir", str(tmp_path / "run"), *COMMON, "--set",
                    "trainer.stop_at_return=null", timeout=LIMIT_S)
    seconds = time.monotonic() - start
    output = done.stdout + done.stderr
    assert done.returncode != 0
    # gpu-vecenv train reports a RuntimeError in one line, as on one process
    assert output.count("error: rank 1 fails on purpose") == 1, output[-3000:]
    assert "rank 0 stopped: another rank failed" in output, output[-3000:]
    assert "forcefully exiting via 9" not in output  # torchrun did not have to SIGKILL
    print(f"failing rank: the job ended {seconds:.1f} s after start")
