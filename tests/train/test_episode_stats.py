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
