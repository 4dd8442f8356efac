"""Which policy controls which vector slot, and the learners built for them.

A single-agent env has one policy, ``default``, over every slot. A multi-agent env's
Gymnasium view has one slot per agent (``slot = game * agents + agent``); the config's
``policies`` map names roles (``"tagger"``) or agent ids (``0``) to policies. Without a
map, a multi-agent env gets one policy per role (Tag: ``tagger`` and ``runner``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gpu_vecenv.train.config import Config
from gpu_vecenv.train.distributions import ActionSpec
from gpu_vecenv.train.learner import Learner, build_learner
from gpu_vecenv.train.logger import EpisodeStats


@dataclass
class PolicyGroup:
    """One policy and the vector slots it acts for (``slots``: ``(N,)`` int64 indices
    into the vector, or ``None`` for all of them). ``block``: ``(agents_per_game, lo,
    hi)`` where the slots are agents ``lo..hi-1`` of every game (Tag's roles): the rows
    are then a strided view of the vector's, copied without an index."""

    name: str
    slots: torch.Tensor | None
    learner: Learner
    stats: EpisodeStats
    block: tuple[int, int, int] | None = None

    def select(self, tensor: torch.Tensor) -> torch.Tensor:
        """The rows of ``tensor`` ``(num_slots, ...)`` that belong to this policy, in
        slot order: ``tensor`` itself where the policy has every slot; for a ``block``
        a strided view ``(games, hi - lo, ...)`` of it (no copy: read it before
        ``tensor`` changes); else a copy ``(N, ...)`` by index. Either way ``N`` rows
        once flattened: :func:`gpu_vecenv.train.storage.store` writes them into a
        ``(N, ...)`` row."""
        if self.slots is None:
            return tensor
        if self.block is not None:
            # a view: its reader copies it once (index_select would read an 8-byte index
            # per element, 3x a float's traffic, 9x a bool's)
            return self._block_view(tensor)
        return tensor.index_select(0, self.slots)

    def put(self, joint: torch.Tensor, rows: torch.Tensor) -> None:
        """Write ``rows`` ``(N, ...)`` into this policy's slots of ``joint``
        ``(num_slots, ...)``."""
        if self.block is not None:
            view = self._block_view(joint)
            view.copy_(rows.unflatten(0, view.shape[:2]))
        else:
            joint.index_copy_(0, self.slots, rows)

    def _block_view(self, tensor: torch.Tensor) -> torch.Tensor:
        """This policy's rows of ``tensor`` ``(num_slots, ...)`` as a strided view
        ``(games, hi - lo, ...)`` (``block`` set)."""
        agents, lo, hi = self.block
        return tensor.unflatten(0, (-1, agents))[:, lo:hi]


def agent_roles(env) -> list[str] | None:
    """The role of each agent of one game, or ``None`` for a single-agent env.

    Reads the multi-agent env's ``roles`` (one role name per agent, e.g. Tag's
    ``("tagger", ..., "runner", ...)``); an env without ``num_games`` is single-agent.
    """
    if not hasattr(env, "num_games"):
        return None
    roles = getattr(env, "roles", None)
    if roles is None:
        return [f"agent_{i}" for i in range(int(env.num_agents))]
    return [str(r) for r in roles]


def slot_assignment(config: Config, env) -> dict[str, list[int] | None]:
    """Policy name -> agent ids within a game (``None``: every slot; single-agent)."""
    roles = agent_roles(env)
    if roles is None:
        if config.policies:
            raise ValueError(f"{config.trainer.env} is single-agent; remove the 'policies' "
                             "section")
        return {"default": None}
    if not config.policies:
        names = list(dict.fromkeys(roles))
        return {name: [i for i, r in enumerate(roles) if r == name] for name in names}
    assignment: dict[str, list[int]] = {}
    owner: dict[int, str] = {}
    for name, spec in config.policies.items():
        ids: list[int] = []
        for agent in spec.agents:
            if isinstance(agent, int):
                if not 0 <= agent < len(roles):
                    raise ValueError(f"policies.{name}.agents: agent id {agent} outside "
                                     f"[0, {len(roles)})")
                ids.append(agent)
            else:
                matched = [i for i, r in enumerate(roles) if r == agent]
                if not matched:
                    raise ValueError(f"policies.{name}.agents: unknown role {agent!r}; "
                                     f"roles of {config.trainer.env}: "
                                     f"{sorted(set(roles))}")
                ids.extend(matched)
        for i in ids:
            if i in owner and owner[i] != name:
                raise ValueError(f"agent {i} ({roles[i]}) is in both policies {owner[i]!r} "
                                 f"and {name!r}")
            owner[i] = name
        assignment[name] = sorted(set(ids))
    unassigned = [i for i in range(len(roles)) if i not in owner]
    if unassigned:
        raise ValueError(f"agents {unassigned} (roles {sorted({roles[i] for i in unassigned})})"
                         f" belong to no policy; list them under policies.<name>.agents")
    return assignment


def build_groups(config: Config, env, device: torch.device, generator: torch.Generator
                 ) -> list[PolicyGroup]:
    """A learner per policy, its slots and episode statistics. Call after seeding torch:
    network initialisation draws from torch's global generator. A multi-agent env's
    learners and statistics are ``masked``: they take the env's ``info["active"]``."""
    spec = ActionSpec.from_space(env.single_action_space)
    obs_shape = env.single_observation_space.shape
    if obs_shape is None or len(obs_shape) != 1:
        raise TypeError(f"the trainer needs flat Box observations, got "
                        f"{env.single_observation_space}")
    obs_dim = int(obs_shape[0])
    assignment = slot_assignment(config, env)
    num_slots = env.num_envs
    # A multi-agent env marks idle slots (info["active"]): its learners weigh them 0.
    multi_agent = assignment.get("default", []) is not None
    agents_per_game = len(agent_roles(env)) if multi_agent else 1
    games = num_slots // agents_per_game
    groups = []
    for name, ids in assignment.items():
        block = None
        if ids is None:
            slots, n = None, num_slots
        else:
            slots = (torch.arange(games, device=device).unsqueeze(1) * agents_per_game
                     + torch.tensor(ids, device=device).unsqueeze(0)).reshape(-1)
            n = slots.shape[0]
            if ids == list(range(ids[0], ids[0] + len(ids))):  # sorted, one range
                block = (agents_per_game, ids[0], ids[0] + len(ids))
        learner = build_learner(config.policy_config(name), obs_dim, spec, n, device,
                                generator, config.trainer.fused_kernels, masked=multi_agent,
                                compile_update=config.trainer.compile_update,
                                matmul_precision=config.trainer.matmul_precision)
        groups.append(PolicyGroup(name, slots, learner,
                                  EpisodeStats(n, device, masked=multi_agent), block))
    steps = {g.learner.steps_per_iteration for g in groups}
    if len(steps) > 1:
        raise ValueError("all policies must use the same num_steps (ppo, a2c) or "
                         "train_frequency (ddpg): the env steps them together")
    return groups


def joint_actions(groups: list[PolicyGroup], num_slots: int, device: torch.device
                  ) -> torch.Tensor | None:
    """The vector's action tensor ``(num_slots, *A)`` that several policies (or one over
    some of the slots) write into (:func:`join_actions`); ``None`` where one policy acts
    for every slot and its actions go to the env as they are."""
    if len(groups) == 1 and groups[0].slots is None:
        return None
    spec = groups[0].learner.spec
    return torch.zeros((num_slots, *spec.action_shape), dtype=spec.dtype, device=device)


def join_actions(groups: list[PolicyGroup], actions: list[torch.Tensor],
                 joint: torch.Tensor | None) -> torch.Tensor:
    """The vector's actions from each group's ``(N, *A)``, written into ``joint`` (from
    :func:`joint_actions`; ``None``: the one group's actions as they are)."""
    if joint is None:
        return actions[0]
    for g, a in zip(groups, actions, strict=True):
        g.put(joint, a)
    return joint
