"""One rank of the data-parallel tests (tests/train/test_distributed.py), started by
``python -m torch.distributed.run --nproc-per-node 2 tests/train/distributed_worker.py
MODE OUT_DIR [ARGS]`` on the CPU (gloo). Each rank writes what the test compares into
``OUT_DIR`` as ``<mode>.rank<r>.json`` or ``.pt``.

Modes:
- ``train RUN_DIR STOP``: a short PPO run on CartPole; the parameter digest after every
  update; with ``STOP`` > 0 the run stops (callback) after that many iterations;
- ``resume RUN_DIR``: continue the run in RUN_DIR;
- ``update ALGO``: one learner update on a fixed roll-out, this rank's half of its slots
  (:func:`fixed_rollout`), rank 1's initial weights drawn differently and replaced by
  rank 0's broadcast; the weights after it;
- ``fail``: a training run whose rank 1 raises in its update number ``WORKER_FAIL_AT``
  (environment; default 2).

``WORKER_DEVICE`` (environment; default ``cpu``) is the device of the training modes:
``cuda`` trains on the CUDA kernels with NCCL, CUDA graphs and fused kernels where they
apply.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import torch

SLOTS = 8
"""slots of the whole roll-out in ``update`` mode (each of 2 ranks takes half)"""
STEPS = 4


def params_digest(module: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for tensor in module.state_dict().values():
        h.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()[:16]


def run_config(run_dir: str, **trainer):
    from gpu_vecenv.train import load_config

    overrides = ["ppo.num_steps=8", "ppo.num_minibatches=2", "ppo.update_epochs=2",
                 "ppo.hidden_sizes=[16,16]", "ppo.normalize_obs=true"]
    device = os.environ.get("WORKER_DEVICE", "cpu")
    values = {"env": "GPUCartPole-v1", "num_envs": 4, "total_steps": 2 * 4 * 8 * 6,
              "device": device, "backend": "torch" if device == "cpu" else "auto",
              "progress": False, "tensorboard": False,
              "checkpoint_interval": 0, "eval_episodes": 0, "seed": 3, "run_dir": run_dir,
              **trainer}
    return load_config(None, overrides, **values)


def record_updates(trainer, digests: list[str], fail_at: int | None = None) -> None:
    """Wrap the trainer's update: the digest of every policy's weights after each."""
    update = trainer.phases.update

    def recorded():
        if fail_at is not None and len(digests) + 1 == fail_at:
            raise RuntimeError(f"rank {trainer.rank} fails on purpose")
        metrics = update()
        digests.append("".join(params_digest(g.learner.model) for g in trainer.groups))
        return metrics

    trainer.phases.update = recorded


def fixed_rollout(learner, slots: slice) -> None:
    """Fill ``learner``'s storage with a roll-out that is a function of nothing but its
    shape (``SLOTS`` slots x ``STEPS`` steps, CartPole-sized), keeping ``slots``."""
    g = torch.Generator().manual_seed(11)
    obs = torch.randn(STEPS, SLOTS, 4, generator=g) * 2.0 + 0.5
    final_obs = torch.randn(STEPS, SLOTS, 4, generator=g)
    actions = torch.randint(0, 2, (STEPS, SLOTS), generator=g)
    rewards = torch.rand(STEPS, SLOTS, generator=g)
    done = torch.rand(STEPS, SLOTS, generator=g) < 0.2
    terminated = done & (torch.rand(STEPS, SLOTS, generator=g) < 0.5)
    s = learner.storage
    with torch.no_grad():
        log_probs = learner.model.evaluate(obs.reshape(-1, 4), actions.reshape(-1))[0]
    log_probs = log_probs.reshape(STEPS, SLOTS)
    for name, value in (("obs", obs), ("final_obs", final_obs), ("actions", actions),
                        ("rewards", rewards), ("done", done), ("terminated", terminated),
                        ("log_probs", log_probs)):
        getattr(s, name).copy_(value[:, slots].to(getattr(s, name).dtype))


def one_update(algo: str, slots: slice, num_slots: int, init_seed: int = 0,
               after_build=None):
    """A fresh learner (weights drawn with ``init_seed``, then ``after_build(learner)``)
    after one update on its part of the roll-out."""
    import gymnasium as gym

    from gpu_vecenv.train.config import A2CConfig, PPOConfig
    from gpu_vecenv.train.distributions import ActionSpec
    from gpu_vecenv.train.learner import build_learner

    config = (PPOConfig(num_steps=STEPS, num_minibatches=1, update_epochs=2,
                        hidden_sizes=(8,), normalize_obs=True, anneal_lr=False)
              if algo == "ppo" else
              A2CConfig(num_steps=STEPS, hidden_sizes=(8,), normalize_obs=True))
    torch.manual_seed(init_seed)
    learner = build_learner(config, 4, ActionSpec.from_space(gym.spaces.Discrete(2)),
                            num_slots, torch.device("cpu"), torch.Generator(), fused=False)
    if after_build is not None:
        after_build(learner)
    fixed_rollout(learner, slots)
    metrics = learner.update()
    return learner, {k: float(v) for k, v in metrics.items()}


def main(argv: list[str]) -> None:
    from gpu_vecenv.train import distributed
    from gpu_vecenv.train.trainer import Trainer

    mode, out = argv[0], Path(argv[1])
    torch.set_num_threads(1)
    if mode == "update":
        distributed.init(torch.device("cpu"))
        rank, world = distributed.rank(), distributed.world_size()
        half = SLOTS // world
        # Rank 1 draws other weights: the trainer's broadcast from rank 0 must fix that.
        learner, metrics = one_update(
            argv[2], slice(rank * half, (rank + 1) * half), half, init_seed=100 * rank,
            after_build=lambda lrn: distributed.broadcast_module(lrn.model))
        torch.save({"model": learner.model.state_dict(), "metrics": metrics},
                   out / f"update-{argv[2]}.rank{rank}.pt")
        distributed.shutdown()
        return
    digests: list[str] = []
    if mode == "train":
        stop = int(argv[3])
        callback = (lambda row: row["iteration"] < stop) if stop else None
        trainer = Trainer(run_config(argv[2]), callback=callback)
    elif mode == "resume":
        trainer = Trainer(run_config(argv[2]), resume=True)
    elif mode == "fail":
        trainer = Trainer(run_config(argv[2]))
    else:
        raise SystemExit(f"unknown mode {mode}")
    fail_at = int(os.environ.get("WORKER_FAIL_AT", "2"))
    record_updates(trainer, digests, fail_at=fail_at if mode == "fail" and trainer.rank == 1
                   else None)
    succeeded = False
    try:
        with trainer:  # its CUDA graphs released before the process group is left
            result = trainer.run()
        succeeded = True
    except Exception as exc:  # as gpu-vecenv train does: the failing rank tells the cause
        if not distributed.is_peer_failure(exc):
            raise
        raise SystemExit(distributed.stop_after_peer_failure(exc, "worker")) from None
    finally:
        distributed.shutdown(succeeded)
    rows = [{k: v for k, v in row.items()
             if k not in ("seconds", "steps_per_second") and not k.startswith("time_")}
            for row in result.metrics]
    (out / f"{mode}.rank{trainer.rank}.json").write_text(json.dumps(
        {"digests": digests, "rows": rows, "stopped": result.stopped,
         "global_step": result.global_step}))


if __name__ == "__main__":
    main(sys.argv[1:])
