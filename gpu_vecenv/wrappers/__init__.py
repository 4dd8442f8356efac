"""Vector-env wrappers that keep their state in torch tensors on the env's device.

Torch-native counterparts of the Gymnasium vector wrappers that RL code reaches for, with
the same names, arguments and ``info`` layout (see docs/wrappers.md for which of
Gymnasium's own vector wrappers work on our envs as they are; those that do not raise a
``TypeError`` or warn with :class:`NumpyWrapperWarning` when they wrap one)::

    from gpu_vecenv.wrappers import (NormalizeObservation, NormalizeReward,
                                     RecordEpisodeStatistics, RecordVideo)

    envs = gym.make_vec("GPUCartPole-v1", num_envs=1024, device="cuda")
    envs = RecordEpisodeStatistics(envs)     # innermost: returns of the raw rewards
    envs = NormalizeReward(NormalizeObservation(envs))

Observation transforms: ``TransformObservation(env, func)`` with a batched torch ``func``,
and ``FlattenObservation``, ``ReshapeObservation``, ``RescaleObservation``,
``DtypeObservation`` built on it.
"""

from gpu_vecenv.gymnasium_wrapper_check import NumpyWrapperWarning
from gpu_vecenv.wrappers.episode_statistics import RecordEpisodeStatistics
from gpu_vecenv.wrappers.normalize_observation import NormalizeObservation
from gpu_vecenv.wrappers.normalize_reward import NormalizeReward
from gpu_vecenv.wrappers.observation_transforms import (
    DtypeObservation,
    FlattenObservation,
    RescaleObservation,
    ReshapeObservation,
    TransformObservation,
)
from gpu_vecenv.wrappers.record_video import RecordVideo
from gpu_vecenv.wrappers.running_mean_std import RunningMeanStd

__all__ = [
    "DtypeObservation",
    "FlattenObservation",
    "NormalizeObservation",
    "NormalizeReward",
    "NumpyWrapperWarning",
    "RecordEpisodeStatistics",
    "RecordVideo",
    "ReshapeObservation",
    "RescaleObservation",
    "RunningMeanStd",
    "TransformObservation",
]
