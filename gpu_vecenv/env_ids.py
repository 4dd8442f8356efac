"""The one table of env ids. Pure data: importing it loads neither torch nor gymnasium.

Adding a shipped env, of either kind: one entry here, one ``envs/<name>.py`` exporting
``DEFINITION`` (an ``EnvDefinition`` or a ``MultiAgentDefinition``: ``make_vec`` builds
the vector env of its kind), one ``cuda_src/<name>.cu``, and their tests. A single-agent
env's time limit is its definition's ``max_episode_steps``, a multi-agent env's its
params' ``episode_length``; neither is repeated here. The entry names the shipped
training configs of the env (``gpu_vecenv/train/configs/<name>.yaml``); the trainer's
defaults per env and the tests' lists of configs are read from here.
A user's env joins the same table at run time through
:func:`gpu_vecenv.register_env.register` (``gpu_vecenv.register``).

An id may name the module that registers it, as Gymnasium's ``make`` allows:
``"my_package.my_env:MyEnv-v0"`` imports ``my_package.my_env`` first, so a config file or
a command line can name a custom env that no code has imported yet.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class _FromDefinition:
    def __repr__(self) -> str:
        return "FROM_DEFINITION"


FROM_DEFINITION: Any = _FromDefinition()
"""``EnvEntry.max_episode_steps`` of a shipped single-agent env: its definition's."""


def declared_time_limit(module: str) -> int | None:
    """The ``max_episode_steps`` that a shipped env's module declares in its
    ``DEFINITION = EnvDefinition(...)``, read from that statement without importing it;
    ``None`` for a ``DEFINITION = MultiAgentDefinition(...)`` (whose games end at their
    params' ``episode_length``, which ``make_vec`` also takes as ``max_episode_steps``).

    Why not import it: Gymnasium's entry point registers every id, time limit included,
    inside ``import gymnasium``, where importing an env module would import torch. The
    value is a literal (an int or None) in the statement; a test ties it to the imported
    definition's. A module already imported answers directly (one still being imported,
    whose own ``import gymnasium`` got here, has no ``DEFINITION`` yet: its text answers).
    """
    loaded = getattr(sys.modules.get(module), "DEFINITION", None)
    if loaded is not None:
        return getattr(loaded, "max_episode_steps", None)
    package, _, name = module.rpartition(".")
    source = (Path(importlib.import_module(package).__path__[0]) / f"{name}.py").read_text()
    start = source.find("\nDEFINITION = ")
    statement = ast.parse(source[start:]).body[0] if start >= 0 else None
    call = getattr(statement, "value", None)
    if getattr(getattr(call, "func", None), "id", None) == "MultiAgentDefinition":
        return None
    for keyword in getattr(call, "keywords", ()):
        if keyword.arg == "max_episode_steps":
            return ast.literal_eval(keyword.value)
    raise ValueError(f"{module} declares no DEFINITION = EnvDefinition(..., "
                     "max_episode_steps=...)")


@dataclass(frozen=True)
class EnvEntry:
    """One registered env id."""

    id: str
    module: str | None
    """Module of a shipped env: it exports ``DEFINITION`` (an ``EnvDefinition`` or a
    ``MultiAgentDefinition``); ``None`` for an env registered at run time (``definition``
    holds it)."""
    max_episode_steps: int | None = FROM_DEFINITION
    """The id's time limit; a shipped env's comes from its definition
    (:func:`declared_time_limit`), so it is written once, in ``envs/<name>.py``."""
    reward_threshold: float | None = None
    summary: str = ""
    definition: Any = None
    """The ``EnvDefinition`` or ``MultiAgentDefinition`` of an env registered at run time."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Default keyword arguments of ``make_vec`` for this id (Gymnasium's ``EnvSpec.kwargs``):
    env parameters, ``preset``, ``device``, ``backend``; those given to ``make_vec`` win."""
    train_configs: tuple[str, ...] = ()
    """The shipped training configs of this env, by name (``gpu_vecenv/train/configs/
    <name>.yaml``; ``gpu-vecenv train <name>``). The first one of an algorithm is the env's
    config for it (``gpu-vecenv train --env ID --algo ALGO``), the very first the env's
    default (``--env ID``). Every shipped env has one; an env registered at run time none."""

    def __post_init__(self) -> None:
        if self.max_episode_steps is FROM_DEFINITION:
            if self.module is None:
                raise ValueError(f"{self.id}: max_episode_steps is needed without a module")
            object.__setattr__(self, "max_episode_steps", declared_time_limit(self.module))


ENVS: dict[str, EnvEntry] = {
    e.id: e
    for e in (
        EnvEntry("GPUCartPole-v1", "gpu_vecenv.envs.cartpole", reward_threshold=475.0,
                 summary="Gymnasium CartPole-v1: balance a pole on a cart",
                 train_configs=("cartpole_ppo", "cartpole_a2c")),
        EnvEntry("GPUAcrobot-v1", "gpu_vecenv.envs.acrobot", reward_threshold=-100.0,
                 summary="Gymnasium Acrobot-v1: swing a two-link arm up",
                 train_configs=("acrobot_ppo",)),
        EnvEntry("GPUMountainCar-v0", "gpu_vecenv.envs.mountain_car", reward_threshold=-110.0,
                 summary="Gymnasium MountainCar-v0: drive up a hill, discrete push",
                 train_configs=("mountain_car_ppo",)),
        EnvEntry("GPUMountainCarContinuous-v0", "gpu_vecenv.envs.mountain_car_continuous",
                 reward_threshold=90.0,
                 summary="Gymnasium MountainCarContinuous-v0: continuous force",
                 train_configs=("mountain_car_continuous_ddpg",)),
        EnvEntry("GPUPendulum-v1", "gpu_vecenv.envs.pendulum",
                 summary="Gymnasium Pendulum-v1: swing up and hold a pendulum",
                 train_configs=("pendulum_ddpg",)),
        EnvEntry("GPUTag-v0", "gpu_vecenv.envs.tag", summary="continuous multi-agent Tag",
                 train_configs=("tag_ppo", "tag_cpu", "tag_taggers_fast",
                                "tag_same_speed", "tag_runners_fast")),
        EnvEntry("GPUTagGrid-v0", "gpu_vecenv.envs.tag_grid", summary="gridworld Tag",
                 train_configs=("tag_grid_ppo",)),
    )
}

SHIPPED_IDS = tuple(ENVS)
"""The ids of the envs inside gpu_vecenv (``ENVS`` also holds those registered since)."""


class UnknownEnvError(KeyError):
    """An env id that is not registered."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


def split_module(env_id: str) -> tuple[str | None, str]:
    """``"pkg.mod:Env-v0"`` -> ``("pkg.mod", "Env-v0")``; ``"Env-v0"`` -> ``(None, "Env-v0")``."""
    if not isinstance(env_id, str):
        raise TypeError(f"env id must be a str, got {type(env_id).__name__}")
    module, colon, name = env_id.partition(":")
    if not colon:
        return None, env_id
    if not module or not name or ":" in name:
        raise UnknownEnvError(f"malformed env id {env_id!r}: expected 'EnvName-v0' or "
                              "'module.path:EnvName-v0'")
    return module, name


def _import_registering_module(module: str, env_id: str) -> None:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
            raise  # the module exists but one of its own imports is missing
        raise UnknownEnvError(
            f"env id {env_id!r}: cannot import module {module!r} ({exc}). It must be "
            "importable: run from the folder that holds it, add that folder to PYTHONPATH, "
            "or install its package"
        ) from None


def _unknown(name: str) -> UnknownEnvError:
    close = difflib.get_close_matches(name, list(ENVS), n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    gymnasium = sys.modules.get("gymnasium")
    if gymnasium is not None and name in gymnasium.registry:
        hint += (" It is registered with Gymnasium but not with gpu_vecenv: register its "
                 "definition with gpu_vecenv.register(id, definition) instead.")
    elif not close:
        hint += (" A custom env must be registered first, with gpu_vecenv.register(id, "
                 "definition), or named with its module, 'my_module:MyEnv-v0', so that "
                 "importing the module registers it.")
    return UnknownEnvError(f"unknown env id {name!r}.{hint} Registered: {', '.join(ENVS)}")


def get_entry(env_id: str) -> EnvEntry:
    """The entry of ``env_id`` (importing its module first for ``"module:Env-v0"``), or
    :class:`UnknownEnvError` naming close matches."""
    module, name = split_module(env_id)
    if module is not None:
        _import_registering_module(module, env_id)
    try:
        return ENVS[name]
    except KeyError:
        raise _unknown(name) from None


def load_module(env_id: str):
    """Import and return the module of a shipped ``env_id``."""
    entry = get_entry(env_id)
    if entry.module is None:
        raise TypeError(f"{entry.id} was registered at run time; it has a definition, not a "
                        "module (use load_definition)")
    return importlib.import_module(entry.module)


def load_definition(env_id: str) -> Any:
    """The ``EnvDefinition`` or ``MultiAgentDefinition`` of ``env_id``."""
    entry = get_entry(env_id)
    if entry.definition is not None:
        return entry.definition
    return importlib.import_module(entry.module).DEFINITION


def list_ids() -> list[str]:
    """All registered ids: the shipped ones in table order, then those registered since."""
    return list(ENVS)


def is_single_agent(definition: Any) -> bool:
    """True for an ``EnvDefinition``, False for a ``MultiAgentDefinition``; else TypeError."""
    from gpu_vecenv.definition import EnvDefinition
    from gpu_vecenv.multi_agent.definition import MultiAgentDefinition

    if isinstance(definition, EnvDefinition):
        return True
    if isinstance(definition, MultiAgentDefinition):
        return False
    raise TypeError(f"definition must be an EnvDefinition or a MultiAgentDefinition, got "
                    f"{type(definition).__name__}")


def shipped_ids(single_agent: bool | None = None) -> list[str]:
    """The shipped ids in table order: all (``None``), the single-agent ones (``True``:
    the classic-control tasks) or the multi-agent ones (``False``; their definitions are
    imported to tell)."""
    if single_agent is None:
        return list(SHIPPED_IDS)
    return [i for i in SHIPPED_IDS if is_single_agent(load_definition(i)) == single_agent]
