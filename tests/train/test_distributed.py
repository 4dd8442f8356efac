"""Data-parallel training (gpu_vecenv.train.distributed) with 2 processes on the CPU:
``torchrun --standalone`` (a free port of its own) with the gloo backend, each launch
bounded by a timeout so a hang fails the test. The ranks are
tests/train/distributed_worker.py (what they compute) and ``python -m gpu_vecenv.train``
(the command line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from gpu_vecenv.train import checkpoint as ckpt
from gpu_vecenv.train import distributed
from gpu_vecenv.train.trainer import Trainer
from tests.train import distributed_worker as worker
from tests.train import ranks
from tests.train.ranks import Finished

WORKER = Path(worker.__file__)
TIMEOUT_S = 120
ITERATIONS = 6
"""iterations of the worker's run (``total_steps`` / (2 ranks x 4 envs x 8 steps))"""


def torchrun(*args: str, timeout: float = TIMEOUT_S, processes: int = 2) -> Finished:
    """``processes`` processes of ``args`` (a script and its arguments, or ``-m module
    ...``); a hang past ``timeout`` kills them all and fails."""
    return ranks.torchrun(*args, timeout=timeout, processes=processes)


def run_worker(out: Path, *args: str) -> None:
    done = torchrun(str(WORKER), args[0], str(out), *args[1:])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def results(out: Path, mode: str) -> list[dict]:
    return [json.loads((out / f"{mode}.rank{r}.json").read_text()) for r in (0, 1)]


def without_timing(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in ("time", "rollout_seconds",
                                                       "update_seconds")} for row in rows]


@pytest.fixture(scope="module")
def full_run(tmp_path_factory) -> Path:
    """An uninterrupted 2-rank PPO run (CartPole, normalised observations)."""
    out = tmp_path_factory.mktemp("full")
    run_worker(out, "train", str(out / "run"), "0")
    return out


def test_both_ranks_hold_identical_weights_after_every_update(full_run):
    rank0, rank1 = results(full_run, "train")
    assert len(rank0["digests"]) == ITERATIONS
    assert rank0["digests"] == rank1["digests"]
    assert len(set(rank0["digests"])) == ITERATIONS  # the weights did move each update
    # The logged rows are global: the same on both ranks, with the world size.
    assert without_timing(rank0["rows"]) == without_timing(rank1["rows"])
    assert all(row["world_size"] == 2 for row in rank0["rows"])
    # global_step counts both ranks' env steps: 2 ranks x 4 envs x 8 steps per iteration.
    assert [row["global_step"] for row in rank0["rows"]] == [64 * (i + 1)
                                                            for i in range(ITERATIONS)]


def test_one_output_per_run_and_a_checkpoint_per_rank(full_run):
    run = full_run / "run"
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["distributed"] == {"world_size": 2, "backend": "gloo"}
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == ITERATIONS and all(row["world_size"] == 2 for row in rows)
    rank0 = ckpt.load_checkpoint(run / "checkpoints" / "latest.pt")
    rank1 = ckpt.load_checkpoint(run / "checkpoints" / "latest.rank1.pt")
    assert (rank0["world_size"], rank0["rank"], rank1["rank"]) == (2, 0, 1)
    model0, model1 = rank0["policies"]["default"]["model"], rank1["policies"]["default"]["model"]
    assert all(torch.equal(model0[k], model1[k]) for k in model0)
    # Each rank's envs are its own (seed + rank * RANK_SEED_STRIDE): different states.
    assert not torch.equal(rank0["env"]["obs"], rank1["env"]["obs"])
    assert not torch.equal(rank0["rng"]["generator"], rank1["rng"]["generator"])


def test_resume_after_a_stop_reproduces_the_uninterrupted_run(full_run, tmp_path):
    run = tmp_path / "run"
    run_worker(tmp_path, "train", str(run), "2")
    stopped = results(tmp_path, "train")[0]
    assert stopped["stopped"] == "callback" and len(stopped["digests"]) == 2
    run_worker(tmp_path, "resume", str(run))
    resumed0, resumed1 = results(tmp_path, "resume")
    full = results(full_run, "train")[0]
    assert stopped["digests"] + resumed0["digests"] == full["digests"]
    assert resumed1["digests"] == resumed0["digests"]
    assert without_timing(stopped["rows"] + resumed0["rows"]) == without_timing(full["rows"])
    for name in ("latest.pt", "latest.rank1.pt"):  # every rank's envs end where they did
        a = ckpt.load_checkpoint(run / "checkpoints" / name)
        b = ckpt.load_checkpoint(full_run / "run" / "checkpoints" / name)
        assert torch.equal(a["env"]["obs"], b["env"]["obs"])
        assert torch.equal(a["rng"]["generator"], b["rng"]["generator"])


def test_resume_on_another_number_of_processes_is_refused(full_run):
    config = worker.run_config(str(full_run / "run"), total_steps=2 * 4 * 8 * 12)
    with pytest.raises(ckpt.CheckpointError, match="2 processes .* this run has 1"):
        Trainer(config, resume=True)


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_two_ranks_make_the_first_update_of_one_rank_on_the_same_global_batch(tmp_path,
                                                                              algo):
    """Gradients averaged, advantages and observation statistics over both ranks: rank
    r's half of the roll-out gives the update that one process makes on all of it (rank
    1 starts from other weights, overwritten by rank 0's broadcast)."""
    run_worker(tmp_path, "update", algo)
    rank0, rank1 = (torch.load(tmp_path / f"update-{algo}.rank{r}.pt") for r in (0, 1))
    reference, metrics = worker.one_update(algo, slice(0, worker.SLOTS), worker.SLOTS)
    for name, value in reference.model.state_dict().items():
        assert torch.equal(rank0["model"][name], rank1["model"][name]), name
        torch.testing.assert_close(rank0["model"][name], value, rtol=1e-5, atol=1e-6)
    # The update moved the weights (the comparison above is not of initial values).
    assert reference.model.state_dict()["actor.0.bias"].abs().sum() > 0
    for name in ("loss", "policy_loss", "value_loss", "entropy"):  # means over the ranks
        mean = (rank0["metrics"][name] + rank1["metrics"][name]) / 2
        assert mean == pytest.approx(metrics[name], rel=1e-4, abs=1e-6), name
    assert rank0["metrics"]["explained_variance"] == pytest.approx(
        metrics["explained_variance"], rel=1e-4, abs=1e-6)


def test_a_failing_rank_ends_the_job_with_its_error_printed_once(tmp_path):
    done = torchrun(str(WORKER), "fail", str(tmp_path), str(tmp_path / "run"), timeout=90)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert output.count("RuntimeError: rank 1 fails on purpose") == 1, output[-3000:]
    assert "rank 0 stopped: another rank failed" in output


def test_command_line_trains_tag_with_two_policies_on_two_ranks(tmp_path):
    run = tmp_path / "tag"
    done = torchrun("-m", "gpu_vecenv.train", "tag_ppo", "--device", "cpu", "--num-envs",
                    "1", "--total-steps", str(2 * 110 * 4 * 2), "--run-dir", str(run),
                    "--set", "trainer.backend=torch", "--set", "ppo.num_steps=4",
                    "--set", "ppo.hidden_sizes=[16]", "--set", "trainer.log_interval=1",
                    "--set", "trainer.eval_episodes=0", "--set", "trainer.tensorboard=false",
                    "--no-progress")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("training GPUTag-v0 with ppo on cpu x 2 ranks") == 1
    assert done.stdout.count("done: 1,760 env steps") == 1
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [row["global_step"] for row in rows] == [880, 1760]
    assert all(row["world_size"] == 2 and "tagger/loss" in row and "runner/loss" in row
               for row in rows)
    rank0 = ckpt.load_checkpoint(run / "checkpoints" / "latest.pt")
    rank1 = ckpt.load_checkpoint(run / "checkpoints" / "latest.rank1.pt")
    for policy in ("tagger", "runner"):
        a, b = rank0["policies"][policy]["model"], rank1["policies"][policy]["model"]
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_gpus_option_needs_as_many_cuda_gpus(tmp_path, capsys):
    from gpu_vecenv.cli import main

    assert main(["train", "--gpus", "4096", "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "--gpus 4096, but torch sees" in err and "gpu_vecenv.train" in err


def test_rank_seeds_are_distinct_and_rank_zero_keeps_the_seed():
    assert distributed.rank_seed(7, 0) == 7
    assert len({distributed.rank_seed(7, r) for r in range(64)}) == 64
    assert distributed.rank_seed(7, 3) == 7 + 3 * distributed.RANK_SEED_STRIDE
    assert not distributed.active() and distributed.world_size() == 1


def test_train_argv_for_torchrun_leaves_out_gpus():
    import argparse

    from gpu_vecenv.train.cli import _train_argv

    args = argparse.Namespace(argv=["train", "cartpole_ppo", "--gpus", "2", "--seed", "3",
                                    "--gpus=4"])
    assert _train_argv(args) == ["cartpole_ppo", "--seed", "3"]


def test_ddpg_trains_on_two_ranks_with_identical_weights_and_own_replay(tmp_path):
    run = tmp_path / "ddpg"
    done = torchrun("-m", "gpu_vecenv.train", "pendulum_ddpg", "--device", "cpu",
                    "--num-envs", "2", "--total-steps", "320", "--run-dir", str(run),
                    "--set", "trainer.backend=torch", "--set", "ddpg.learning_starts=160",
                    "--set", "ddpg.batch_size=16", "--set", "ddpg.hidden_sizes=[8]",
                    "--set", "trainer.log_interval=40", "--set", "trainer.eval_episodes=0",
                    "--set", "trainer.tensorboard=false", "--no-progress")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["global_step"] == 320 and "critic_loss" in rows[-1]
    rank0 = ckpt.load_checkpoint(run / "checkpoints" / "latest.pt")["policies"]["default"]
    rank1 = ckpt.load_checkpoint(run / "checkpoints" / "latest.rank1.pt")["policies"]["default"]
    assert all(torch.equal(rank0["model"][k], rank1["model"][k]) for k in rank0["model"])
    assert not torch.equal(rank0["replay"]["obs"], rank1["replay"]["obs"])


AGREE_SCRIPT = """
import json, sys, torch
from gpu_vecenv.train import distributed
from gpu_vecenv.train.autoscale import resolve_num_envs
from gpu_vecenv.train.config_loading import load_config
distributed.init(torch.device("cpu"))
rank = distributed.rank()
config = load_config(None, ["trainer.device=cpu", "trainer.num_envs=auto"])
# Each rank pretends its search chose another number; all must use the smallest.
import gpu_vecenv.train.autoscale as autoscale
autoscale.choose_num_envs = lambda config, device, trainer_class, log: type(
    "C", (), {"num_envs": 64 >> rank})()
chosen = resolve_num_envs(config, torch.device("cpu"), None, log=None,
                          agree=lambda n: distributed.agree_min(n, torch.device("cpu")))
with open(f"{sys.argv[1]}/rank{rank}.json", "w") as f:
    json.dump({"rank": rank, "num_envs": chosen.trainer.num_envs}, f)
distributed.shutdown()  # (a group left to interpreter exit can abort in gloo's threads)
"""


def test_ranks_agree_on_the_smallest_auto_num_envs(tmp_path):
    script = tmp_path / "agree.py"
    script.write_text(AGREE_SCRIPT)
    done = torchrun(str(script), str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    chosen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [c["num_envs"] for c in chosen] == [32, 32]  # rank 0 chose 64, rank 1 32
