"""The device and the env that a config's ``trainer`` section names.

The trainer, the evaluation, ``num_envs: auto``'s probes and the play against random
policies all build them from a config the same way, here, below all of them (none of
them imports another to make its env).
"""

from __future__ import annotations

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.train.config import Config


def trainer_device(setting: str) -> torch.device:
    """The device that ``trainer.device`` (or ``gpu-vecenv eval --device``) names:
    ``auto`` -> ``cuda`` (no index) if torch sees a GPU, else the CPU; any other torch
    device name as it is.

    Raises:
        ValueError: not a torch device name (the message names ``trainer.device``).
        RuntimeError: ``cuda`` where torch sees no CUDA GPU.

    (An env's own ``device=`` argument is checked by :func:`gpu_vecenv.devices.usable_device`,
    whose ``None`` is this ``auto`` and which gives ``cuda`` its current index.)
    """
    if setting == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(setting)
    except RuntimeError as exc:
        raise ValueError(f"trainer.device: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("trainer.device is cuda but torch sees no CUDA GPU")
    return device


def make_env(config: Config, device: torch.device, num_envs: int | None = None, **kwargs):
    """The training env (SAME_STEP autoreset so ``final_obs`` is available, reused
    output buffers). ``trainer.env`` is any registered id, ``"module:Env-v0"`` included."""
    from gpu_vecenv.entry_points import make_vec

    t = config.trainer
    return make_vec(t.env, num_envs or t.num_envs, device=device, backend=t.backend,
                    autoreset_mode=AutoresetMode.SAME_STEP, copy=False,
                    **t.env_kwargs, **kwargs)
