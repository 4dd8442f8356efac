"""Preallocated device storage: the on-policy roll-out and DDPG's replay buffer.

``T`` roll-out steps, ``N`` agent slots of one policy, ``D`` observation size, ``A`` the
shape of one action (``()`` for Discrete).
"""

from __future__ import annotations

import torch


def store(row: torch.Tensor, rows: torch.Tensor) -> None:
    """Copy ``rows`` into ``row`` ``(N, ...)``: ``rows`` is ``(N, ...)``, or a policy's
    block of the vector's rows ``(games, agents, ...)`` with ``games * agents = N`` (a
    strided view from :meth:`gpu_vecenv.train.policies.PolicyGroup.select`), copied
    without an intermediate contiguous copy."""
    row.view(rows.shape).copy_(rows)


class RolloutStorage:
    """One iteration of on-policy data, written step by step, read as a flat batch.

    Shapes: ``obs``/``final_obs`` ``(T, N, D)``; ``actions`` ``(T, N, *A)``;
    ``log_probs``/``rewards`` ``(T, N)`` float32; ``terminated``/``done`` ``(T, N)`` bool.
    ``final_obs[t]`` is the observation that followed ``actions[t]``: the last one of
    the episode where it ended at ``t`` (the env's ``info["final_obs"]``).
    With ``masked`` (a multi-agent env), ``mask`` ``(T, N)`` float32 is 1 where row ``t``
    of a slot is a sample of its game and 0 where the slot was idle when ``obs[t]`` was
    observed (:mod:`gpu_vecenv.train.masked`); else ``mask`` is ``None``.
    """

    def __init__(self, num_steps: int, num_slots: int, obs_dim: int,
                 action_shape: tuple[int, ...], action_dtype: torch.dtype,
                 device: torch.device, masked: bool = False):
        t, n = num_steps, num_slots
        self.num_steps, self.num_slots = t, n
        self.obs = torch.zeros((t, n, obs_dim), device=device)
        self.final_obs = torch.zeros((t, n, obs_dim), device=device)
        self.actions = torch.zeros((t, n, *action_shape), dtype=action_dtype, device=device)
        self.log_probs = torch.zeros((t, n), device=device)
        self.rewards = torch.zeros((t, n), device=device)
        self.terminated = torch.zeros((t, n), dtype=torch.bool, device=device)
        self.done = torch.zeros((t, n), dtype=torch.bool, device=device)
        self.mask = torch.ones((t, n), device=device) if masked else None

    def flat(self, tensor: torch.Tensor) -> torch.Tensor:
        """``(T, N, ...)`` -> ``(T*N, ...)`` (a view)."""
        return tensor.reshape(self.num_steps * self.num_slots, *tensor.shape[2:])


class ReplayBuffer:
    """A ring buffer of transitions on the device; ``N`` rows are added per env step.

    Shapes (``C`` = capacity): ``obs``/``next_obs`` ``(C, D)``, ``actions`` ``(C, d)``,
    ``rewards`` ``(C,)``, ``terminated`` ``(C,)`` bool. ``next_obs`` is the true next
    observation (``final_obs`` at an episode end), so truncated transitions bootstrap.
    The write position and fill level are host integers: they advance by a fixed
    ``N`` per step, so no value is read back from the device.
    """

    def __init__(self, capacity: int, num_slots: int, obs_dim: int, action_dim: int,
                 device: torch.device):
        if capacity < num_slots:
            raise ValueError(f"replay buffer_size ({capacity}) must hold at least one step "
                             f"of all {num_slots} slots")
        self.capacity = capacity
        self.device = device
        self.obs = torch.zeros((capacity, obs_dim), device=device)
        self.next_obs = torch.zeros((capacity, obs_dim), device=device)
        self.actions = torch.zeros((capacity, action_dim), device=device)
        self.rewards = torch.zeros(capacity, device=device)
        self.terminated = torch.zeros(capacity, dtype=torch.bool, device=device)
        self._rows = torch.arange(num_slots, device=device)
        self.pos = 0
        self.size = 0

    def add(self, obs: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor,
            next_obs: torch.Tensor, terminated: torch.Tensor) -> None:
        """Append one step of every slot (``(N, ...)`` each), overwriting the oldest."""
        index = (self._rows + self.pos) % self.capacity
        self.obs.index_copy_(0, index, obs)
        self.actions.index_copy_(0, index, actions)
        self.rewards.index_copy_(0, index, rewards)
        self.next_obs.index_copy_(0, index, next_obs)
        self.terminated.index_copy_(0, index, terminated)
        n = self._rows.shape[0]
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator
               ) -> tuple[torch.Tensor, ...]:
        """``(obs, actions, rewards, next_obs, terminated)`` of ``batch_size`` uniform
        draws (with replacement) from the filled part."""
        index = torch.randint(0, self.size, (batch_size,), device=self.device,
                              generator=generator)
        return (self.obs[index], self.actions[index], self.rewards[index],
                self.next_obs[index], self.terminated[index])

    def state_dict(self) -> dict:
        """The filled rows and positions (plain tensors and ints, for checkpoints)."""
        n = self.size
        return {"pos": self.pos, "size": n, "obs": self.obs[:n].clone(),
                "next_obs": self.next_obs[:n].clone(), "actions": self.actions[:n].clone(),
                "rewards": self.rewards[:n].clone(), "terminated": self.terminated[:n].clone()}

    def load_state_dict(self, state: dict) -> None:
        n = int(state["size"])
        if n > self.capacity:
            raise ValueError(f"checkpoint replay buffer holds {n} rows, capacity is "
                             f"{self.capacity}")
        for name in ("obs", "next_obs", "actions", "rewards", "terminated"):
            getattr(self, name)[:n].copy_(state[name])
        self.pos, self.size = int(state["pos"]), n
