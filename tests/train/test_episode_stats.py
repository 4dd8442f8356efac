"""EpisodeStats: the returns and lengths of the episodes that end, summed on the device."""

from __future__ import annotations

import torch

from gpu_vecenv.train.logger import EpisodeStats


def _steps(stats: EpisodeStats, rewards: list[list[float]], dones: list[list[bool]]) -> None:
    for r, d in zip(rewards, dones, strict=True):
        stats.update(torch.tensor(r), torch.tensor(d))


def test_ended_episodes_are_summed_and_running_ones_carried_on():
    stats = EpisodeStats(3, torch.device("cpu"))
    _steps(stats, [[1.0, 2.0, 0.5], [1.0, -1.0, 0.5], [1.0, 4.0, 0.5]],
           [[False, False, True], [True, False, False], [False, True, False]])
    # slot 0: 2.0 over 2 steps; slot 1: 5.0 over 3 steps; slot 2: 0.5 over 1 step
    assert stats.read() == {"episode_return": 7.5 / 3, "episode_length": 2.0,
                            "episodes": 3.0}
    assert stats.running_return.tolist() == [1.0, 0.0, 1.0]
    assert stats.running_length.tolist() == [1.0, 0.0, 2.0]
    assert stats.read() is None  # nothing ended since


def test_a_restored_state_goes_on_as_the_saved_one():
    saved = EpisodeStats(2, torch.device("cpu"))
    _steps(saved, [[1.0, 2.0], [3.0, 4.0]], [[True, False], [False, False]])
    restored = EpisodeStats(2, torch.device("cpu"))
    restored.load_state_dict(saved.state_dict())
    for stats in (saved, restored):
        _steps(stats, [[1.0, 1.0]], [[True, True]])
    assert restored.read() == saved.read() == {
        "episode_return": (1.0 + 4.0 + 7.0) / 3, "episode_length": (1.0 + 2.0 + 3.0) / 3,
        "episodes": 3.0}
    state = restored.state_dict()
    assert {k: tuple(v.shape) for k, v in state.items()} == {
        "running_return": (2,), "running_length": (2,), "totals": (3,)}


def test_a_block_of_the_vectors_rows_counts_as_its_copy():
    """A policy's rows as a strided view (games, agents) of the vector's (Tag's roles,
    PolicyGroup.select) give the sums of the same rows copied out, masked or not."""
    g = torch.Generator().manual_seed(2)
    games, agents, lo, hi = 4, 5, 1, 4
    for masked in (False, True):
        viewed = EpisodeStats(games * (hi - lo), torch.device("cpu"), masked=masked)
        copied = EpisodeStats(games * (hi - lo), torch.device("cpu"), masked=masked)
        for _ in range(30):
            reward = torch.randn(games * agents, generator=g)
            done = torch.rand(games * agents, generator=g) < 0.2
            active = torch.rand(games * agents, generator=g) < 0.8
            block = [t.view(games, agents)[:, lo:hi] for t in (reward, done, active)]
            assert not block[0].is_contiguous()
            viewed.update(*block[:2], block[2] if masked else None)
            copied.update(*[t.reshape(-1) for t in block[:2]],
                          block[2].reshape(-1) if masked else None)
        assert torch.equal(viewed.totals, copied.totals)
        assert torch.equal(viewed.running_return, copied.running_return)
        assert torch.equal(viewed.running_length, copied.running_length)
        assert viewed.read() == copied.read() is not None


def test_a_nan_reward_stays_in_its_own_episode():
    """An episode that has not ended adds nothing to the totals, NaN or not."""
    stats = EpisodeStats(2, torch.device("cpu"))
    _steps(stats, [[float("nan"), 1.0], [0.0, 2.0]], [[False, False], [False, True]])
    assert stats.read() == {"episode_return": 3.0, "episode_length": 2.0, "episodes": 1.0}
