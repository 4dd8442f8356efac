"""Vector-env wrappers that keep their state in torch tensors on the env's device.

Torch-native counterparts of the Gymnasium vector wrappers that RL code reaches for, with
the same names, arguments and ``info`` layout (see docs/wrappers.md for which of
Gymnasium's own vector wrappers work on our envs as they are)::

    from gpu_vecenv.wrappers import (NormalizeObservation, NormalizeReward,
                                     RecordEpisodeStatistics, RecordVideo)

    envs = gym.make_vec("GPUCartPole-v1", num_envs=1024, device="cuda")
    envs = RecordEpisodeStatistics(envs)     # innermost: returns of the raw rewards
    envs = NormalizeReward(NormalizeObservation(envs))
"""

from gpu_vecenv.wrappers.episode_statistics import RecordEpisodeStatistics
from gpu_vecenv.wrappers.normalize_observation import NormalizeObservation
from gpu_vecenv.wrappers.normalize_reward import NormalizeReward
from gpu_vecenv.wrappers.record_video import RecordVideo
from gpu_vecenv.wrappers.running_mean_std import RunningMeanStd

__all__ = [
    "NormalizeObservation",
    "NormalizeReward",
    "RecordEpisodeStatistics",
    "RecordVideo",
    "RunningMeanStd",
]
