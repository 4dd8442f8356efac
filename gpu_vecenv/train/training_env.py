"""The device and the env that a config's ``trainer`` section names.

The trainer, the evaluation, ``num_envs: auto``'s probes and the play against random
policies all build them from a config the same way, here, below all of them (none of
them imports another to make its env).
"""

from __future__ import annotations

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.train.config import Config
from gpu_vecenv.train.shipped_configs import GPU_SIZED_ON_CPU, cpu_config_for


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


def cpu_size_warning(config: Config, num_slots: int, batch: int) -> str:
    """What a run of a GPU-sized config on the CPU is told: its size, that it takes hours,
    and what to run instead (the env's shipped CPU config with what it reached there,
    :data:`~.shipped_configs.CPU_SIZED`, else smaller sizes)."""
    t = config.trainer
    agents = num_slots // t.num_envs
    layout = f": {t.num_envs:,} games x {agents} agents" if agents > 1 else ""
    measured = GPU_SIZED_ON_CPU.get(t.env)
    message = (f"this config is sized for a GPU ({num_slots:,} vector slots{layout}, "
               f"{batch:,} steps per iteration, {t.total_steps:,} in all) and runs "
               f"on the CPU: expect hours" + (f"; {measured}" if measured else ""))
    cpu_config = cpu_config_for(t.env)
    if cpu_config is not None:
        name, reached = cpu_config
        before = "" if measured else " before its policies beat random play"
        return (f"{message}{before}; for a CPU, the shipped `gpu-vecenv train {name}`: "
                f"{reached}")
    return (f"{message}; for a CPU try num_envs {max(1, 1024 // agents)} and fewer "
            f"total_steps (--num-envs, --total-steps)")
