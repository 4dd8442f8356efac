"""Short CPU runs pinned bit for bit: metrics, final checkpoint and evaluation.

The expected digests were recorded from the code *before* the trainer refactor of issue 14
item 4 (``Learner`` protocol, separate PPO and A2C, timing in the logger; commit 09146bc
on ``main``), by running this file's :func:`digest` on each run. The refactor had to keep
every logged metric, every checkpoint tensor (keys included: old checkpoints must still
load) and every evaluation result identical; so must later changes that mean to keep
behaviour. A change that alters training on purpose re-records them (``python -m
tests.train.test_reference_runs`` prints the new table) and says so in its commit.

Timing columns (``time``, ``steps_per_second``, ``rollout_seconds``, ``update_seconds``)
are wall-clock measurements and are left out; their presence is checked.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from gpu_vecenv.train import checkpoint as ckpt
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.trainer import Trainer

TIMING_KEYS = ("time", "steps_per_second", "rollout_seconds", "update_seconds")
COMMON = {"device": "cpu", "backend": "torch", "progress": False, "tensorboard": False,
          "log_interval": 1, "checkpoint_interval": 0, "eval_episodes": 2, "seed": 5}

RUNS: dict[str, tuple[list[str], dict[str, Any]]] = {
    "ppo-cartpole": (["ppo.num_steps=8", "ppo.num_minibatches=2", "ppo.update_epochs=2",
                      "ppo.hidden_sizes=[16,16]"],
                     {"env": "GPUCartPole-v1", "num_envs": 4, "total_steps": 4 * 8 * 4}),
    "ppo-cartpole-target-kl-normobs": (
        ["ppo.num_steps=8", "ppo.hidden_sizes=[16]", "ppo.target_kl=0.001",
         "ppo.normalize_obs=true", "ppo.learning_rate=0.01"],
        {"env": "GPUCartPole-v1", "num_envs": 4, "total_steps": 4 * 8 * 3}),
    "ppo-cartpole-stop-at-return": (["ppo.num_steps=8", "ppo.hidden_sizes=[16]"],
                                    {"env": "GPUCartPole-v1", "num_envs": 8,
                                     "total_steps": 8 * 8 * 60, "stop_at_return": 15.0}),
    "ppo-pendulum-box": (["ppo.num_steps=8", "ppo.normalize_obs=true",
                          "ppo.hidden_sizes=[16,16]", "ppo.reward_scale=0.1"],
                         {"env": "GPUPendulum-v1", "num_envs": 4, "total_steps": 4 * 8 * 3}),
    "a2c-acrobot": (["trainer.algo=a2c", "a2c.hidden_sizes=[16]"],
                    {"env": "GPUAcrobot-v1", "num_envs": 4, "total_steps": 4 * 5 * 4}),
    "a2c-mountaincar-adam-box": (["trainer.algo=a2c", "a2c.optimizer=adam",
                                  "a2c.hidden_sizes=[16]", "a2c.norm_adv=true",
                                  "a2c.anneal_lr=true"],
                                 {"env": "GPUMountainCarContinuous-v0", "num_envs": 4,
                                  "total_steps": 4 * 5 * 4}),
    "ddpg-pendulum": (["trainer.algo=ddpg", "ddpg.learning_starts=12", "ddpg.batch_size=8",
                       "ddpg.gradient_steps=2", "ddpg.policy_delay=2", "ddpg.noise=ou",
                       "ddpg.hidden_sizes=[16,16]", "ddpg.train_frequency=2",
                       "ddpg.buffer_size=64", "ddpg.normalize_obs=true"],
                      {"env": "GPUPendulum-v1", "num_envs": 2, "total_steps": 2 * 2 * 8}),
    "ppo-taggrid-two-policies": (["ppo.num_steps=4", "ppo.hidden_sizes=[16]",
                                  "ppo.num_minibatches=2"],
                                 {"env": "GPUTagGrid-v0", "num_envs": 2,
                                  "total_steps": 2 * 11 * 4 * 3}),
}

EXPECTED = {
    "ppo-cartpole": ("dae82c3be6d60ed7", "fe65a0ca03a54b1d", "e4bc42e748e87cd6"),
    "ppo-cartpole-target-kl-normobs": ("e07d1f73d1003faf", "c4548faad3370638", "e4bc42e748e87cd6"),
    "ppo-cartpole-stop-at-return": ("3f6c8e362e045461", "9cd5dfabefa4e5ce", "e4bc42e748e87cd6"),
    "ppo-pendulum-box": ("b829738dce7cc289", "fa2a3dbc8da5dbe8", "f06525a3a4fc858b"),
    "a2c-acrobot": ("11dd656c17091183", "90adbaabe5998931", "7dc16db5527938b9"),
    "a2c-mountaincar-adam-box": ("27d20a8bf85af67e", "4c30d73c9fc037a9", "8589644df5913929"),
    "ddpg-pendulum": ("6945f601f1b67647", "aaa5cd96a10b5fe5", "2401fef551c206d9"),
    "ppo-taggrid-two-policies": ("a742271279e8480e", "ee8487c9cceb0c7a", "a970a866183e3c5e"),
}
"""run -> (metrics digest, checkpoint digest, evaluation digest), recorded before the
refactor (see the module docstring). ppo-taggrid-two-policies re-recorded when multi-agent
learners began to weigh idle slots 0 (issue 30): its rows gained ``live_fraction`` and
masked means, its checkpoint the learners' ``live`` flags."""


def _update(h: Any, value: Any) -> None:
    """Feed ``value`` (nested dicts, lists, tensors, numbers, strings) into hash ``h``."""
    if isinstance(value, dict):
        h.update(b"{")
        for key in sorted(value, key=str):
            h.update(repr(key).encode())
            _update(h, value[key])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(b"[")
        for item in value:
            _update(h, item)
        h.update(b"]")
    elif isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    else:
        h.update(repr(value).encode())


def _hash(value: Any) -> str:
    h = hashlib.sha256()
    _update(h, value)
    return h.hexdigest()[:16]


def digest(run_dir: Path, name: str) -> tuple[str, str, str]:
    """Train run ``name`` in ``run_dir``; the digests of its logged rows (timing left out),
    its final checkpoint and its evaluation."""
    overrides, trainer = RUNS[name]
    config = load_config(None, overrides, run_dir=str(run_dir), **{**COMMON, **trainer})
    result = Trainer(config).run()
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert rows == json.loads(json.dumps(result.metrics))
    for row in rows:
        assert all(key in row for key in TIMING_KEYS)
    rows = [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in rows]
    payload = ckpt.load_checkpoint(run_dir / "checkpoints" / "latest.pt", "cpu")
    payload["config"]["trainer"]["run_dir"] = None  # a temporary directory
    # Config keys added after these digests were recorded, at their defaults: they do not
    # change training (the rows, weights and evaluation are pinned as they were).
    added = {"autoscale": "memory", "autoscale_memory_fraction": 0.8,
             "autoscale_max_envs": 2**24, "num_envs_global": None}
    for key, default in added.items():
        assert payload["config"]["trainer"].pop(key) == default
    for section in ("ppo", "a2c"):
        assert payload["config"][section].pop("bootstrap_truncated") is True
    return _hash(rows), _hash(payload), _hash(result.evaluation)


@pytest.mark.parametrize("name", list(RUNS))
def test_run_is_bit_for_bit_as_before_the_refactor(tmp_path, name):
    assert digest(tmp_path, name) == EXPECTED[name]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for run in RUNS:
            print(f"    {run!r}: {digest(Path(tmp) / run, run)!r},")
