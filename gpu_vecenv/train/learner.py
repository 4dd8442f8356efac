"""What the trainer loop asks of an algorithm: the :class:`Learner` protocol.

One learner trains one policy over its ``N`` agent slots. Per iteration the loop calls,
in this order (rsl_rl's runner -> algorithm -> storage, CleanRL's ``ppo.py`` loop)::

    learner.begin_iteration(global_step, fraction_done)    # host-side settings
    for step in range(learner.steps_per_iteration):        # the roll-out
        actions = learner.act(step, obs)                   # (N, D) -> (N, *A)
        ... env.step(actions) ...
        learner.record(step, reward, terminated, done, final_obs[, active])
    if learner.ready(global_step + batch):                 # host integers only
        metrics = learner.update()                         # {name: device scalar}

PPO (:mod:`.ppo`, with the fused kernels :mod:`.fused_ppo_learner`), A2C (:mod:`.a2c`) and DDPG
(:mod:`.ddpg`) implement it; :func:`build_learner` picks one for an algorithm config.
"""

from __future__ import annotations

from typing import Protocol

import torch

from gpu_vecenv.train.config import A2CConfig, DDPGConfig, PPOConfig
from gpu_vecenv.train.distributions import ActionSpec


class Learner(Protocol):
    """One policy's algorithm: acts during the roll-out, stores what it needs, updates.

    ``act``, ``record`` and ``update`` only queue device work (no host reads), so the
    roll-out and the update can be captured as CUDA graphs; ``begin_iteration`` and
    ``ready`` run on the host, outside any graph.
    """

    model: torch.nn.Module
    """the network (``act_deterministic`` is what evaluation runs)"""
    spec: ActionSpec
    """the policy's action space"""
    steps_per_iteration: int
    """vector steps per iteration (PPO, A2C: ``num_steps``; DDPG: ``train_frequency``)"""

    def begin_iteration(self, global_step: int, fraction_done: float) -> None:
        """Before the roll-out: ``global_step`` env steps done, ``fraction_done`` of the
        run's iterations (learning-rate annealing, DDPG's warm-up)."""

    def act(self, step: int, obs: torch.Tensor) -> torch.Tensor:
        """Actions ``(N, *A)`` for ``obs`` ``(N, D)`` at row ``step`` of the iteration.

        Here and in :meth:`record`, a multi-agent policy's rows may come as a strided
        view ``(games, agents, ...)`` of the vector's (``games * agents = N``,
        :meth:`gpu_vecenv.train.policies.PolicyGroup.select`): valid until the env
        steps again, stored with :func:`gpu_vecenv.train.storage.store`."""

    def record(self, step: int, reward: torch.Tensor, terminated: torch.Tensor,
               done: torch.Tensor, final_obs: torch.Tensor,
               active: torch.Tensor | None = None) -> None:
        """What the env returned for the actions of row ``step``: ``(N,)`` each, and
        ``final_obs`` ``(N, D)`` (the true next observation, also where an episode
        ended); ``active`` ``(N,)`` bool, a multi-agent env's ``info["active"]`` (which
        slots' new observations are live), given exactly when the learner was built
        ``masked``."""

    def ready(self, global_step: int) -> bool:
        """Whether to update after a roll-out that brought the run to ``global_step``."""

    def update(self) -> dict[str, torch.Tensor]:
        """Learn from what was recorded; returns device scalars to log."""

    def state_dict(self) -> dict:
        """Everything a checkpoint needs to resume exactly."""

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` (tensors are copied in place)."""


def build_learner(config: PPOConfig | A2CConfig | DDPGConfig, obs_dim: int,
                  spec: ActionSpec, num_slots: int, device: torch.device,
                  generator: torch.Generator, fused: bool | None = None,
                  masked: bool = False, compile_update: bool = False,
                  matmul_precision: str | None = None) -> Learner:
    """The learner of ``config``'s algorithm for ``num_slots`` slots.

    ``masked``: the slots belong to a multi-agent env whose idle slots (``info["active"]``
    False) must weigh nothing in the update (PPO and A2C; :mod:`gpu_vecenv.train.masked`).

    ``fused`` (``trainer.fused_kernels``): PPO's update through the fused CUDA kernels
    (``None``: where they apply; ``True``: required, else a ``ValueError`` says why not;
    ``False``: torch ops and autograd). ``compile_update`` (``trainer.compile_update``):
    PPO's and A2C's loss on torch ops compiled (:mod:`gpu_vecenv.train.compiled_loss`;
    the fused kernels have their own). ``matmul_precision`` (``trainer.matmul_precision``):
    how the fused kernels' products run (``None``: by torch's setting when they are built;
    the trainer sets its own only after building its learners). Draws the network's
    initial weights from torch's global generator.
    """
    from gpu_vecenv.train.a2c import A2CLearner
    from gpu_vecenv.train.ddpg import DDPGLearner
    from gpu_vecenv.train.fused_ppo_learner import FusedPPOLearner, fused_kernels_apply
    from gpu_vecenv.train.ppo import PPOLearner

    args = (config, obs_dim, spec, num_slots, device, generator)
    if isinstance(config, DDPGConfig):
        if fused:
            raise ValueError("trainer.fused_kernels=true, but they implement PPO's "
                             "update, not ddpg's")
        if compile_update:
            raise ValueError("trainer.compile_update compiles ppo's and a2c's loss, not "
                             "ddpg's")
        learner = DDPGLearner(*args)
        if masked:  # no multi-agent env has Box actions yet
            raise ValueError("ddpg does not mask the idle slots of a multi-agent env; use "
                             "ppo or a2c")
        return learner
    if fused_kernels_apply(fused, config, obs_dim, spec, device, masked):
        return FusedPPOLearner(*args, matmul_precision=matmul_precision)
    if isinstance(config, PPOConfig):
        return PPOLearner(*args, masked=masked, compile_update=compile_update)
    return A2CLearner(*args, masked=masked, compile_update=compile_update)
