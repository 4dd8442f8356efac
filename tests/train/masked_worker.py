"""A roll-out with idle multi-agent slots, for tests/train/test_idle_slots.py, and one
rank of its data-parallel test: ``python -m torch.distributed.run --nproc-per-node 2
tests/train/masked_worker.py ALGO OUT_DIR`` (CPU, gloo) makes one masked update on this
rank's half of the slots and saves ``update-ALGO.rank<r>.pt``.

The roll-out mimics a tagged runner's slot (:mod:`gpu_vecenv.multi_agent.vector_env`):
live, ``terminated`` on the step it is tagged, then idle (zero observation, reward 0, no
``done``) until its game resets, then live again. Every slot has its own schedule, so
the two halves hold different numbers of live rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import torch

SLOTS, STEPS, OBS_DIM = 8, 6, 5
SPACE = gym.spaces.MultiDiscrete([3, 4])  # Tag's kind of action space
TAGGED_AT = (1, None, 0, 3, None, 2, 0, 4)
"""Per slot: the step its runner is tagged (None: never in this roll-out)."""
RESET_AT = (4, None, 6, 6, None, 4, 2, 6)
"""Per slot: the first row of its game's next episode (6: after the roll-out)."""


def live_rows() -> torch.Tensor:
    """``(STEPS + 1, SLOTS)`` bool: whether row ``t``'s observation is live; the last row
    is the one after the roll-out (what ``info["active"]`` says after its last step)."""
    live = torch.ones(STEPS + 1, SLOTS, dtype=torch.bool)
    for slot, (tag, reset) in enumerate(zip(TAGGED_AT, RESET_AT, strict=True)):
        if tag is not None:
            live[tag + 1:reset, slot] = False
    return live


def build(algo: str, num_slots: int = SLOTS, masked: bool = True, norm_adv: bool = True,
          init_seed: int = 0, minibatches: int = 2):
    """A fresh learner (weights from ``init_seed``, sampling generator seeded 7)."""
    from gpu_vecenv.train.config import A2CConfig, PPOConfig
    from gpu_vecenv.train.distributions import ActionSpec
    from gpu_vecenv.train.learner import build_learner

    config = (PPOConfig(num_steps=STEPS, num_minibatches=minibatches, update_epochs=2,
                        hidden_sizes=(8,), normalize_obs=True, anneal_lr=False,
                        norm_adv=norm_adv, ent_coef=0.05, learning_rate=0.01)
              if algo == "ppo" else
              A2CConfig(num_steps=STEPS, hidden_sizes=(8,), normalize_obs=True,
                        norm_adv=norm_adv, ent_coef=0.05, learning_rate=0.01))
    torch.manual_seed(init_seed)
    return build_learner(config, OBS_DIM, ActionSpec.from_space(SPACE), num_slots,
                         torch.device("cpu"), torch.Generator().manual_seed(7), fused=False,
                         masked=masked)


def fill(learner, slots: slice = slice(None), idle: str = "zeros") -> None:
    """Write the roll-out's rows of ``slots`` into ``learner`` through ``record``, as the
    trainer does. ``idle``: what idle rows hold, ``"zeros"`` (as the env gives) or
    ``"garbage"`` (random values of every kind, which must change nothing)."""
    g = torch.Generator().manual_seed(11)
    live = live_rows()
    obs = torch.randn(STEPS, SLOTS, OBS_DIM, generator=g) * 2.0 + 0.5
    final_obs = torch.randn(STEPS, SLOTS, OBS_DIM, generator=g)
    actions = torch.stack([torch.randint(0, n, (STEPS, SLOTS), generator=g)
                           for n in SPACE.nvec], dim=-1)
    rewards = torch.randn(STEPS, SLOTS, generator=g)
    terminated = torch.zeros(STEPS, SLOTS, dtype=torch.bool)
    done = torch.rand(STEPS, SLOTS, generator=g) < 0.15  # truncations of live rows
    for slot, tag in enumerate(TAGGED_AT):
        if tag is not None:
            terminated[tag, slot] = done[tag, slot] = True
            rewards[tag, slot] = -10.0
    idle_rows = ~live[:STEPS]
    junk = torch.Generator().manual_seed(99)
    if idle == "garbage":
        filler = {"obs": torch.randn(STEPS, SLOTS, OBS_DIM, generator=junk) * 7.0,
                  "final_obs": torch.randn(STEPS, SLOTS, OBS_DIM, generator=junk) * 7.0,
                  "rewards": torch.randn(STEPS, SLOTS, generator=junk) * 30.0}
    else:
        filler = {"obs": torch.zeros_like(obs), "final_obs": torch.zeros_like(final_obs),
                  "rewards": torch.zeros_like(rewards)}
    obs = torch.where(idle_rows[..., None], filler["obs"], obs)
    final_obs = torch.where(idle_rows[..., None], filler["final_obs"], final_obs)
    rewards = torch.where(idle_rows, filler["rewards"], rewards)
    done &= live[:STEPS]  # an idle slot gets no done
    if idle == "garbage":
        other = torch.stack([torch.randint(0, n, (STEPS, SLOTS), generator=junk)
                             for n in SPACE.nvec], dim=-1)
        actions = torch.where(idle_rows[..., None], other, actions)
    s = learner.storage
    with torch.no_grad():
        log_probs = learner.model.evaluate(obs.reshape(-1, OBS_DIM),
                                           actions.reshape(-1, len(SPACE.nvec)))[0]
    log_probs = log_probs.reshape(STEPS, SLOTS)
    if idle == "garbage":
        log_probs = torch.where(idle_rows, torch.randn(STEPS, SLOTS, generator=junk) * 3.0,
                                log_probs)
    s.obs.copy_(obs[:, slots])
    s.actions.copy_(actions[:, slots])
    s.log_probs.copy_(log_probs[:, slots])
    for t in range(STEPS):
        active = live[t + 1, slots] if learner.storage.mask is not None else None
        learner.record(t, rewards[t, slots], terminated[t, slots], done[t, slots],
                       final_obs[t, slots], active)


def main(argv: list[str]) -> None:
    from gpu_vecenv.train import distributed

    algo, out = argv[0], Path(argv[1])
    torch.set_num_threads(1)
    distributed.init(torch.device("cpu"))
    rank, world = distributed.rank(), distributed.world_size()
    half = SLOTS // world
    learner = build(algo, half, minibatches=1, init_seed=100 * rank)
    distributed.broadcast_module(learner.model)  # rank 1's other weights: rank 0's now
    fill(learner, slice(rank * half, (rank + 1) * half))
    metrics = {k: float(v) for k, v in learner.update().items()}
    torch.save({"model": learner.model.state_dict(), "metrics": metrics},
               out / f"update-{algo}.rank{rank}.pt")
    distributed.shutdown()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parents[2]))
    main(sys.argv[1:])
