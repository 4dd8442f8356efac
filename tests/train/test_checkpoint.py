"""Checkpoints: atomic writes, weights_only loading, clear errors, exact resume."""

from __future__ import annotations

import json
import os

import pytest
import torch

from gpu_vecenv.train import checkpoint as ckpt
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.evaluation import load_models
from gpu_vecenv.train.trainer import Trainer

LOSS_KEYS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "critic_loss",
             "actor_loss", "q_mean", "episode_return")


def _config(run_dir, *overrides, **trainer):
    base = {"device": "cpu", "backend": "torch", "run_dir": str(run_dir), "progress": False,
            "tensorboard": False, "eval_episodes": 0, "checkpoint_interval": 0}
    return load_config(None, list(overrides), **{**base, **trainer})


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "c.pt"
    first = {"iteration": 1, "global_step": 8}
    ckpt.save_checkpoint({"config": {}, "counters": first, "policies": {}}, path)
    assert ckpt.load_checkpoint(path)["counters"] == first

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        ckpt.save_checkpoint({"config": {}, "counters": {"iteration": 2, "global_step": 16},
                              "policies": {}}, path)
    monkeypatch.undo()
    assert ckpt.load_checkpoint(path)["counters"] == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]  # no temp file left


def test_corrupt_and_foreign_checkpoints_raise_clear_errors(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ckpt.CheckpointError, match="corrupt"):
        ckpt.load_checkpoint(bad)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(ckpt.CheckpointError, match="not a gpu_vecenv"):
        ckpt.load_checkpoint(foreign)
    with pytest.raises(FileNotFoundError):
        ckpt.find_checkpoint(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        ckpt.find_checkpoint(tmp_path)


def _losses(rows):
    """Per row: every loss and return (of every policy: keys may be "tagger/loss")."""
    return [{k: v for k, v in r.items() if k.split("/")[-1] in LOSS_KEYS}
            | {"global_step": r["global_step"]} for r in rows]


@pytest.mark.parametrize(
    "overrides, trainer",
    [
        (["ppo.num_steps=8", "ppo.normalize_obs=true"], {"num_envs": 8, "total_steps": 384}),
        (["trainer.algo=a2c"], {"num_envs": 4, "total_steps": 120}),
        (["trainer.algo=ddpg", "ddpg.learning_starts=40", "ddpg.batch_size=16",
          "ddpg.hidden_sizes=[16]", "ddpg.noise=ou", "ddpg.policy_delay=2",
          "ddpg.gradient_steps=2", "ddpg.normalize_obs=true"],
         {"env": "GPUPendulum-v1", "num_envs": 4, "total_steps": 120}),
        (["ppo.num_steps=4", "ppo.hidden_sizes=[16]"],
         {"env": "GPUTag-v0", "num_envs": 2, "total_steps": 528}),
    ],
    ids=["ppo", "a2c", "ddpg", "tag-ppo"],
)
def test_resume_reproduces_an_uninterrupted_run_exactly(tmp_path, overrides, trainer):
    full = Trainer(_config(tmp_path / "full", *overrides, **trainer)).run()
    assert len(full.metrics) >= 4
    assert len(_losses(full.metrics)[-1]) >= 4

    half = len(full.metrics) // 2
    stopped = Trainer(_config(tmp_path / "resumed", *overrides, **trainer),
                      callback=lambda row: row["iteration"] < half).run()
    assert len(stopped.metrics) == half
    resumed = Trainer(_config(tmp_path / "resumed", *overrides, **trainer), resume=True).run()

    assert _losses(stopped.metrics + resumed.metrics) == _losses(full.metrics)
    # The log file of the resumed run equals the uninterrupted one, row for row.
    rows = [json.loads(line) for line in (tmp_path / "resumed" / "metrics.jsonl").open()]
    assert _losses(rows) == _losses(full.metrics)


def test_checkpoint_contents_load_with_weights_only(tmp_path):
    result = Trainer(_config(tmp_path / "r", "ppo.num_steps=4", num_envs=4,
                             total_steps=32)).run()
    path = result.run_dir / "checkpoints" / "latest.pt"
    payload = torch.load(path, weights_only=True)
    assert payload["counters"] == {"iteration": 2, "global_step": 32}
    assert set(payload["policies"]["default"]) == {"model", "optimizer"}
    assert "generator" in payload["rng"] and "state" in payload["env"]
    config, models, step = load_models(result.run_dir, torch.device("cpu"))
    assert step == 32 and list(models) == ["default"]
    assert config.trainer.num_envs == 4


def test_kept_checkpoints_hold_the_run_as_it_was_at_each_save(tmp_path):
    """keep_checkpoints: every checkpoint also stays as step_<global_step>.pt; each holds
    the weights of its step (those of a run stopped there), and the last is latest.pt."""
    fixed_lr = "ppo.anneal_lr=false"  # else the learning rate follows total_steps
    config = _config(tmp_path / "kept", "ppo.num_steps=4", fixed_lr, num_envs=4,
                     total_steps=96, checkpoint_interval=2, keep_checkpoints=True)
    Trainer(config).run()
    folder = tmp_path / "kept" / "checkpoints"
    kept = sorted(p.name for p in folder.glob("step_*.pt"))
    assert kept == [f"step_{s:012d}.pt" for s in (32, 64, 96)]
    assert sorted(p.name for p in folder.iterdir()) == sorted([*kept, "latest.pt"])
    short = Trainer(_config(tmp_path / "short", "ppo.num_steps=4", fixed_lr, num_envs=4,
                            total_steps=32)).run()

    def weights(path):
        return ckpt.load_checkpoint(path)["policies"]["default"]["model"]

    first = weights(folder / kept[0])
    assert ckpt.load_checkpoint(folder / kept[0])["counters"]["global_step"] == 32
    assert all(torch.equal(first[k], v)
               for k, v in weights(short.run_dir / "checkpoints" / "latest.pt").items())
    assert not all(torch.equal(first[k], v) for k, v in weights(folder / kept[1]).items())
    assert all(torch.equal(weights(folder / "latest.pt")[k], v)
               for k, v in weights(folder / kept[2]).items())
    config_, models, step = load_models(folder / kept[1], torch.device("cpu"))
    assert step == 64 and list(models) == ["default"]


def test_resume_with_a_different_config_is_refused(tmp_path):
    Trainer(_config(tmp_path / "r", "ppo.num_steps=4", num_envs=4, total_steps=32)).run()
    with pytest.raises(ckpt.CheckpointError, match="ppo.num_steps"):
        Trainer(_config(tmp_path / "r", "ppo.num_steps=8", num_envs=4, total_steps=32),
                resume=True)
    # total_steps may change: a run can be extended
    Trainer(_config(tmp_path / "r", "ppo.num_steps=4", num_envs=4, total_steps=64),
            resume=True).run()


def test_new_run_refuses_to_overwrite(tmp_path):
    Trainer(_config(tmp_path / "r", "ppo.num_steps=4", num_envs=4, total_steps=16)).run()
    with pytest.raises(ValueError, match="already holds a run"):
        Trainer(_config(tmp_path / "r", "ppo.num_steps=4", num_envs=4, total_steps=16))
