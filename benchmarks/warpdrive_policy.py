"""WarpDrive's trained Tag policies, acting in our GPUTag-v0 (for ``versus_random``).

WarpDrive 2.7.1's ``FullyConnected`` (``warp_drive/training/models/fully_connected.py``)
is one shared trunk, ``fc["i"] = Sequential(Linear, ReLU)`` for each of ``fc_dims``, then a
softmax head per action dimension (``policy_head[d] = Linear(fc_dims[-1], nvec[d])``) and
a value head (``vf_head = Linear(fc_dims[-1], 1)``). Its constructor needs WarpDrive's env
wrapper and data manager, so :class:`WarpDriveFullyConnected` rebuilds the same modules
under the same parameter names in plain torch: a WarpDrive ``state_dict`` loads into it
unchanged and gives the same outputs (tests/test_bench_vs_warpdrive_trainer.py checks
both against WarpDrive's own class where WarpDrive imports).

**Observations.** WarpDrive's ``TagContinuous`` (CUDA kernel
``CudaTagContinuousGenerateObservation``, and its CPU ``generate_observation``) writes, per
agent, feature-major: for each of Δx/(√2·L), Δy/(√2·L), Δspeed/(max_speed+ε),
Δacc/(max_speed+ε), Δdir/(2π), the other's type (1 tagger, 0 runner) and its
still-in-the-game flag, the values of the K nearest others still in the game (partial
mode, zero-padded) or of all N-1 others in id order (full mode); then t/episode_length;
all zeros for an agent out of the game (partial mode). Ours (``envs/tag.py`` ``observe``)
writes exactly that block first, then optional extras: the own state (5 floats,
``observe_own_state``) and the own role (1 float, ``observe_own_role``). So WarpDrive's
observation is our first ``7·observed + 1`` floats (:func:`warpdrive_observation`), for
any parameters but ``egocentric=True``, which rotates Δx, Δy into the agent's frame.
Actions need no mapping: both are ``MultiDiscrete([A+1, R+1])`` with index 0 the no-op
and index i the i-th level of ``linspace(min, max, levels)``. Where the two envs still
differ (docs/tag_rules.md): WarpDrive observes before the step's tags are removed, picks
its taggers among random ids (the policies never see ids) and starts every game from one
fixed layout.

``B`` is the batch; ``D`` our observation size; ``W`` WarpDrive's (``7·observed + 1``).
"""

from __future__ import annotations

import re

import torch
from torch import nn

from gpu_vecenv.envs.tag import NUM_FEATURES, TagParams
from gpu_vecenv.train import distributions
from gpu_vecenv.train.distributions import ActionSpec


def warpdrive_obs_dim(params: TagParams) -> int:
    """``W``: the size of WarpDrive's observation of the game ``params`` describes."""
    return NUM_FEATURES * params.num_observed + 1


def observation_mapping_problem(params: TagParams) -> str | None:
    """Why our observations under ``params`` cannot feed a WarpDrive policy (None: they
    can, by :func:`warpdrive_observation`)."""
    if params.egocentric:
        return ("egocentric=True: our Δx, Δy are in the agent's own frame, WarpDrive's in "
                "the field's")
    return None


def warpdrive_observation(obs: torch.Tensor, params: TagParams) -> torch.Tensor:
    """WarpDrive's observation from ours: ``(..., D)`` -> ``(..., W)``, our leading block
    (the own state and own role that ours may append are dropped)."""
    problem = observation_mapping_problem(params)
    if problem:
        raise ValueError(f"WarpDrive's policy cannot read this observation: {problem}")
    if obs.shape[-1] != params.obs_dim:
        raise ValueError(f"observation of {obs.shape[-1]} floats; these TagParams give "
                         f"{params.obs_dim}")
    return obs[..., : warpdrive_obs_dim(params)]


class WarpDriveFullyConnected(nn.Module):
    """WarpDrive's ``FullyConnected`` for MultiDiscrete actions, in plain torch.

    Args:
        obs_dim: ``W``, its input size.
        fc_dims: the trunk's widths (tag_continuous.yaml: ``[256, 256]``).
        nvec: the categories of each action dimension (Tag: ``(A+1, R+1)``).
    """

    def __init__(self, obs_dim: int, fc_dims: list[int] | tuple[int, ...],
                 nvec: tuple[int, ...]):
        super().__init__()
        self.fc = nn.ModuleDict()
        for i, (a, b) in enumerate(zip([obs_dim, *fc_dims[:-1]], fc_dims, strict=True)):
            self.fc[str(i)] = nn.Sequential(nn.Linear(a, b), nn.ReLU())
        self.policy_head = nn.ModuleList(nn.Linear(fc_dims[-1], n) for n in nvec)
        self.vf_head = nn.Linear(fc_dims[-1], 1)

    @classmethod
    def from_state_dict(cls, state_dict: dict[str, torch.Tensor]) -> WarpDriveFullyConnected:
        """The network a WarpDrive ``FullyConnected`` state dict describes, loaded with it
        (sizes read from the weights' shapes)."""
        layers = sorted(int(m.group(1)) for k in state_dict
                        if (m := re.fullmatch(r"fc\.(\d+)\.0\.weight", k)))
        heads = sorted(int(m.group(1)) for k in state_dict
                       if (m := re.fullmatch(r"policy_head\.(\d+)\.weight", k)))
        if not layers or not heads or "vf_head.weight" not in state_dict:
            raise ValueError("not a WarpDrive FullyConnected state dict (MultiDiscrete): "
                             f"keys {sorted(state_dict)[:8]}...")
        fc_dims = [int(state_dict[f"fc.{i}.0.weight"].shape[0]) for i in layers]
        obs_dim = int(state_dict["fc.0.0.weight"].shape[1])
        nvec = tuple(int(state_dict[f"policy_head.{i}.weight"].shape[0]) for i in heads)
        model = cls(obs_dim, fc_dims, nvec)
        model.load_state_dict(state_dict)
        return model

    def trunk(self, obs: torch.Tensor) -> torch.Tensor:
        """``(..., W)`` -> ``(..., fc_dims[-1])``."""
        for i in range(len(self.fc)):
            obs = self.fc[str(i)](obs)
        return obs

    def forward(self, obs: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """WarpDrive's output: ``([probabilities (..., nvec[d]) per dimension], values
        (...))``."""
        x = self.trunk(obs)
        return ([torch.softmax(head(x), dim=-1) for head in self.policy_head],
                self.vf_head(x)[..., 0])

    def logits_and_value(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (..., sum(nvec)), values (...))``: the heads before the softmax,
        concatenated (our ``ActionSpec`` layout)."""
        x = self.trunk(obs)
        return torch.cat([head(x) for head in self.policy_head], dim=-1), self.vf_head(x)[..., 0]


class WarpDrivePolicy(nn.Module):
    """A WarpDrive network acting on our observations, with the interface of our
    ``ActorCritic`` that ``play_episodes`` / ``versus_random`` use.

    Args:
        network: WarpDrive's trained network (:class:`WarpDriveFullyConnected`).
        params: the game our env plays (its observation layout).
        spec: our action space's spec (``MultiDiscrete([A+1, R+1])``).
    """

    def __init__(self, network: WarpDriveFullyConnected, params: TagParams, spec: ActionSpec):
        super().__init__()
        widths = tuple(head.out_features for head in network.policy_head)
        if spec.kind != "multidiscrete" or tuple(spec.nvec) != widths or any(spec.start):
            raise ValueError(f"WarpDrive's heads {widths} do not match our action space "
                             f"{spec}")
        wanted = network.fc["0"][0].in_features
        if warpdrive_obs_dim(params) != wanted:
            raise ValueError(f"WarpDrive's network reads {wanted} floats; these TagParams "
                             f"give WarpDrive observations of {warpdrive_obs_dim(params)}")
        self.network, self.params, self.spec = network, params, spec

    def _logits_and_value(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.network.logits_and_value(warpdrive_observation(obs, self.params))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, D)`` -> ``(B,)``."""
        return self._logits_and_value(obs)[1]

    def act(self, obs: torch.Tensor, generator: torch.Generator
            ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sampled ``(actions (B, 2) int64, log_prob (B,))``."""
        logits, _ = self._logits_and_value(obs)
        action = distributions.sample(self.spec, logits, None, generator)
        log_prob, _ = distributions.log_prob_and_entropy(self.spec, logits, None, action)
        return action, log_prob

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy, value)``, each ``(B,)``."""
        logits, value = self._logits_and_value(obs)
        log_prob, entropy = distributions.log_prob_and_entropy(self.spec, logits, None, action)
        return log_prob, entropy, value

    def deterministic_action(self, obs: torch.Tensor) -> torch.Tensor:
        """The most likely action of each head, ``(B, 2)`` int64."""
        return distributions.mode(self.spec, self._logits_and_value(obs)[0])


def warpdrive_policies(state_dicts: dict[str, dict[str, torch.Tensor]], params: TagParams,
                       spec: ActionSpec, device: torch.device | str = "cpu"
                       ) -> dict[str, WarpDrivePolicy]:
    """``{"tagger": ..., "runner": ...}``: WarpDrive's trained networks (its policy name ->
    state dict) as our models, in eval mode on ``device``."""
    return {name: WarpDrivePolicy(WarpDriveFullyConnected.from_state_dict(sd), params, spec)
            .to(device).eval() for name, sd in state_dicts.items()}
