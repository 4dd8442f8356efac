"""The ``make_vec`` / ``make`` entry points of every registered id, and Gymnasium's view of
the table.

``register_envs()`` is what the ``gymnasium.envs`` entry point and the start-up hook
call for the shipped ids; it only registers strings, so it costs nothing until an env is
made. Gymnasium resolves ``"gpu_vecenv.entry_points:vector_GPUCartPole-v1"`` through this
module's ``__getattr__`` into a maker bound to that id. A user's env joins the table
through :func:`gpu_vecenv.register_env.register` (``gpu_vecenv.register``).

This module must not import gymnasium (or torch) when it is imported: the start-up hook
imports it from inside ``import gymnasium``.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

from gpu_vecenv.env_ids import (
    ENVS,
    SHIPPED_IDS,
    EnvEntry,
    get_entry,
    is_single_agent,
    load_definition,
)
from gpu_vecenv.make_arguments import (
    count_of_games,
    merge_vector_kwargs,
    warn_if_num_envs_counts_games,
)


def register_envs() -> None:
    """Register every shipped id with Gymnasium (ids already present are left alone)."""
    import gymnasium as gym

    for env_id in SHIPPED_IDS:
        if env_id not in gym.registry:
            register_with_gymnasium(ENVS[env_id])


def register_with_gymnasium(entry: EnvEntry) -> None:
    """Add ``entry`` to Gymnasium's registry (its makers are this module's)."""
    import gymnasium as gym

    # A multi-agent env's time limit is its params' episode_length; Gymnasium would pass
    # it on as max_episode_steps and clash with an episode_length given to make_vec.
    single_agent = entry.module is not None or is_single_agent(entry.definition)
    gym.register(
        id=entry.id,
        entry_point=f"gpu_vecenv.entry_points:single_{entry.id}",
        vector_entry_point=f"gpu_vecenv.entry_points:vector_{entry.id}",
        max_episode_steps=entry.max_episode_steps if single_agent else None,
        reward_threshold=entry.reward_threshold,
        kwargs=dict(entry.kwargs),
    )


# -- making envs --


def vector_env_class(definition: Any) -> type:
    """The vector env of ``definition``'s kind: ``GpuVectorEnv`` (an ``EnvDefinition``) or
    ``MultiAgentVectorEnv`` (a ``MultiAgentDefinition``). Every env, shipped or registered,
    is one of the two built from its definition; no env has a class of its own."""
    if is_single_agent(definition):
        from gpu_vecenv.vector_env import GpuVectorEnv

        return GpuVectorEnv
    from gpu_vecenv.multi_agent import MultiAgentVectorEnv

    return MultiAgentVectorEnv


def make_vec(env_id: str, num_envs: int = 1, **kwargs: Any):
    """Make the vector env of ``env_id``.

    ``num_envs``: envs, or games of a multi-agent env (whose ``env.num_envs`` is then
    ``games * agents`` slots); ``num_games=G`` is the same for a multi-agent env, said
    plainly. ``kwargs``: as for :class:`~gpu_vecenv.vector_env.GpuVectorEnv`
    (single-agent) or :class:`~gpu_vecenv.multi_agent.MultiAgentVectorEnv`, plus
    Gymnasium's ``vector_kwargs={"autoreset_mode": ..., "copy": ...}``; the id's
    registered ``kwargs`` fill in what is not given (see :mod:`gpu_vecenv.make_arguments`)."""
    entry = get_entry(env_id)
    definition = load_definition(env_id)
    single_agent = is_single_agent(definition)
    kwargs = merge_vector_kwargs(env_id, {**entry.kwargs, **kwargs})
    num_envs = count_of_games(env_id, num_envs, kwargs, single_agent)
    if single_agent or "episode_length" not in kwargs:
        # The id's time limit; a multi-agent env takes it as its params' episode_length,
        # which one given by name overrides.
        kwargs.setdefault("max_episode_steps", entry.max_episode_steps)
    env = vector_env_class(definition)(definition, num_envs, **kwargs)
    env.env_id = env_id
    return env


def make_vec_for_gymnasium(env_id: str, num_envs: int = 1, **kwargs: Any):
    """What ``gymnasium.make_vec`` calls: :func:`make_vec`, warning when ``num_envs``
    counts the games of a multi-agent env (Gymnasium's callers expect ``env.num_envs ==
    num_envs``)."""
    env = make_vec(env_id, num_envs, **kwargs)
    warn_if_num_envs_counts_games(env_id, num_envs, kwargs, env)
    return env


def make_single(env_id: str, **kwargs: Any):
    """A one-env ``gymnasium.Env`` view of ``env_id`` (what ``gymnasium.make`` calls); a
    ``TypeError`` for a multi-agent id, naming the views that fit it."""
    from gpu_vecenv.single_env import SingleEnvView

    return SingleEnvView(env_id, **{**get_entry(env_id).kwargs, **kwargs})


def make_kwargs_of(env: Any) -> tuple[str, dict[str, Any]]:
    """``(env_id, kwargs)`` such that ``make_vec(env_id, n, **kwargs)`` makes envs like
    ``env`` (same definition, parameters and time limit; any ``n``, device, backend).

    ``env`` is a vector env made by :func:`make_vec` (it knows its id) or directly from a
    registered definition. ``kwargs`` holds only what differs from the id's defaults.
    """
    definition = getattr(env, "definition", None)
    if definition is None:
        raise TypeError(f"expected a gpu_vecenv vector env (GpuVectorEnv or "
                        f"MultiAgentVectorEnv, unwrapped), got {type(env).__name__}")
    env_id = getattr(env, "env_id", None)
    if env_id is None:
        ids = [i for i in ENVS if load_definition(i) is definition]
        if not ids:
            raise ValueError(
                f"this env's definition {definition.name!r} is not registered, so it "
                f"cannot be made again by id; register it first: "
                f"gpu_vecenv.register('MyEnv-v0', definition)")
        env_id = ids[0]
    defaults = make_vec_params(env_id)
    kwargs = {f.name: getattr(env.params, f.name) for f in dataclasses.fields(env.params)
              if getattr(env.params, f.name) != getattr(defaults, f.name)}
    if is_single_agent(definition):
        if env.max_episode_steps != get_entry(env_id).max_episode_steps:
            kwargs["max_episode_steps"] = env.max_episode_steps
    return env_id, kwargs


def make_vec_params(env_id: str) -> Any:
    """The params dataclass that ``make_vec(env_id)`` builds when given no parameters."""
    entry = get_entry(env_id)
    definition = load_definition(env_id)
    fields = {f.name for f in dataclasses.fields(definition.params_type)}
    params = {k: v for k, v in entry.kwargs.items() if k in fields}
    if is_single_agent(definition):
        return definition.make_params(**params)
    if entry.max_episode_steps is not None:
        params.setdefault("episode_length", entry.max_episode_steps)
    return definition.make_params(entry.kwargs.get("preset"), **params)


def __getattr__(name: str):
    for prefix, maker in (("vector_", make_vec_for_gymnasium), ("single_", make_single)):
        if name.startswith(prefix) and name[len(prefix):] in ENVS:
            return partial(maker, name[len(prefix):])
    raise AttributeError(f"module 'gpu_vecenv.entry_points' has no attribute {name!r}")


__all__ = ["is_single_agent", "make_kwargs_of", "make_single", "make_vec",
           "make_vec_for_gymnasium", "make_vec_params",
           "register_envs", "register_with_gymnasium",
           "vector_env_class"]
