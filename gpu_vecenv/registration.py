"""Registering env ids, and the ``make_vec`` / ``make`` entry points of every id.

``register_envs()`` is what the ``gymnasium.envs`` entry point and the start-up hook
call for the shipped ids; it only registers strings, so it costs nothing until an env is
made. :func:`register` (``gpu_vecenv.register``) adds a user's env definition under an id,
in gpu_vecenv's table and in Gymnasium's, so that ``gpu_vecenv.make_vec``,
``gymnasium.make_vec``, the trainer and every adapter can make it by id.

Gymnasium resolves ``"gpu_vecenv.registration:vector_GPUCartPole-v1"`` through this
module's ``__getattr__`` into a maker bound to that id.
"""

from __future__ import annotations

import dataclasses
import difflib
from functools import partial
from typing import Any

import gymnasium as gym

from gpu_vecenv.registry import ENVS, SHIPPED_IDS, EnvEntry, get_entry, load_definition

_FROM_DEFINITION: Any = object()

MAKE_OPTIONS_IN_KWARGS = ("device", "backend")
"""Options of ``make_vec`` that ``register(kwargs=...)`` may preset besides the env's
parameters (and a multi-agent env's ``preset``); the others (autoreset mode, copy, ...)
are the caller's choice at each ``make_vec``."""


class RegistrationError(gym.error.RegistrationError, ValueError):
    """An id that cannot be registered: malformed, or taken (pass ``override=True``)."""


def register_envs() -> None:
    """Register every shipped id with Gymnasium (ids already present are left alone)."""
    for env_id in SHIPPED_IDS:
        if env_id not in gym.registry:
            _register_with_gymnasium(ENVS[env_id])


def _register_with_gymnasium(entry: EnvEntry) -> None:
    # A multi-agent env's time limit is its params' episode_length; Gymnasium would pass
    # it on as max_episode_steps and clash with an episode_length given to make_vec.
    single_agent = entry.module is not None or _is_single_agent(entry.definition)
    gym.register(
        id=entry.id,
        entry_point=f"gpu_vecenv.registration:single_{entry.id}",
        vector_entry_point=f"gpu_vecenv.registration:vector_{entry.id}",
        max_episode_steps=entry.max_episode_steps if single_agent else None,
        reward_threshold=entry.reward_threshold,
        kwargs=dict(entry.kwargs),
    )


def register(
    id: str,  # noqa: A002 - Gymnasium's name for it
    definition: Any,
    *,
    max_episode_steps: int | None = _FROM_DEFINITION,
    reward_threshold: float | None = None,
    kwargs: dict[str, Any] | None = None,
    override: bool = False,
    summary: str = "",
) -> EnvEntry:
    """Register ``definition`` under ``id`` with gpu_vecenv and with Gymnasium.

    Afterwards ``gpu_vecenv.make_vec(id, n)``, ``gymnasium.make_vec(id, num_envs=n)``,
    ``gymnasium.make(id)`` (single-agent), ``gpu_vecenv.parallel_env(id)`` (multi-agent),
    the trainer (``trainer.env: id``) and the adapters accept the id. Follows
    ``gymnasium.register``: ids are ``[namespace/]Name[-vN]``; ``kwargs`` are default
    arguments of every make (those given to the make win).

    Args:
        id: the env id, e.g. ``"PointReach-v0"`` (no ``:``: that separates a module name,
            as in ``"my_module:PointReach-v0"``).
        definition: an :class:`~gpu_vecenv.definition.EnvDefinition` (single-agent) or a
            :class:`~gpu_vecenv.tag_definition.MultiAgentDefinition`.
        max_episode_steps: the time limit of this id. Default: the definition's
            ``max_episode_steps`` (single-agent) or the params' ``episode_length``
            (multi-agent; a value given here becomes that ``episode_length``).
        reward_threshold: the return at which the env counts as solved (Gymnasium's).
        kwargs: default make arguments: fields of the definition's params dataclass, and
            ``device``, ``backend`` and (multi-agent) ``preset``. Checked now.
        override: replace an id that is already registered. Registering the same entry
            again is always allowed (it does nothing).
        summary: one line for ``gpu-vecenv list -v``.

    Returns:
        The new :class:`~gpu_vecenv.registry.EnvEntry`.

    Raises:
        RegistrationError: a malformed id, or one already taken (by another definition
            or other arguments, or by a Gymnasium env) without ``override=True``.
        TypeError, ValueError: a definition of the wrong type, unknown or invalid
            ``kwargs``, a bad ``max_episode_steps``.
    """
    full_id = _checked_id(id)
    single_agent = _is_single_agent(definition)
    kwargs = dict(kwargs or {})
    _check_kwargs(full_id, definition, single_agent, kwargs)
    if max_episode_steps is _FROM_DEFINITION:
        max_episode_steps = definition.max_episode_steps if single_agent else None
    _check_time_limit(full_id, definition, single_agent, max_episode_steps)
    entry = EnvEntry(full_id, None, max_episode_steps, reward_threshold, summary, definition,
                     kwargs)
    existing = ENVS.get(full_id)
    if existing == entry:
        return existing
    if existing is not None and _reloaded(existing, entry):
        # the module that registers the id ran again (importlib.reload, IPython's
        # autoreload): its new definition replaces the old one without an error
        ENVS[full_id] = entry
        return entry
    if not override:
        if existing is not None:
            what = (f"by module {existing.module}" if existing.module else
                    f"for definition {existing.definition.name!r}")
            raise RegistrationError(
                f"env id {full_id!r} is already registered ({what}, max_episode_steps="
                f"{existing.max_episode_steps}, kwargs={existing.kwargs}); pass "
                f"override=True to replace it, or register a new version, e.g. "
                f"{_next_version(full_id)!r}")
        if full_id in gym.registry:
            raise RegistrationError(
                f"env id {full_id!r} is already a Gymnasium env (entry point "
                f"{gym.registry[full_id].entry_point}); pass override=True to replace it")
    # The caller asked for the replacement: spare them Gymnasium's "Overriding" warning.
    previous_spec = gym.registry.pop(full_id, None)
    try:
        _register_with_gymnasium(entry)
    except Exception:
        if previous_spec is not None:
            gym.registry[full_id] = previous_spec
        raise
    ENVS[full_id] = entry
    return entry


def _reloaded(existing: EnvEntry, new: EnvEntry) -> bool:
    """``new`` is ``existing`` but for a definition built again by the same code."""
    if existing.definition is None or dataclasses.replace(
            existing, definition=new.definition) != new:
        return False

    def origin(definition: Any) -> tuple:
        params = definition.params_type
        return type(definition), definition.name, params.__module__, params.__qualname__

    return origin(existing.definition) == origin(new.definition)


def _is_single_agent(definition: Any) -> bool:
    from gpu_vecenv.definition import EnvDefinition
    from gpu_vecenv.tag_definition import MultiAgentDefinition

    if isinstance(definition, EnvDefinition):
        return True
    if isinstance(definition, MultiAgentDefinition):
        return False
    raise TypeError(f"definition must be an EnvDefinition or a MultiAgentDefinition, got "
                    f"{type(definition).__name__}")


def _checked_id(env_id: Any) -> str:
    """``env_id`` as Gymnasium will store it (with the current namespace, if any)."""
    from gymnasium.envs import registration as gym_registration

    if not isinstance(env_id, str):
        raise TypeError(f"env id must be a str, got {type(env_id).__name__}")
    if ":" in env_id:
        raise RegistrationError(
            f"malformed env id {env_id!r}: ':' separates a module from an id "
            "('my_module:MyEnv-v0', to make an env its module registers) and cannot be "
            "part of one")
    try:
        namespace, name, version = gym_registration.parse_env_id(env_id)
    except gym.error.Error as exc:
        raise RegistrationError(f"malformed env id {env_id!r}: {exc}") from None
    namespace = gym_registration.current_namespace or namespace
    return gym_registration.get_env_id(namespace, name, version)


def _next_version(env_id: str) -> str:
    from gymnasium.envs.registration import get_env_id, parse_env_id

    namespace, name, version = parse_env_id(env_id)
    return get_env_id(namespace, name, 0 if version is None else version + 1)


def _check_kwargs(env_id: str, definition: Any, single_agent: bool,
                  kwargs: dict[str, Any]) -> None:
    """Unknown names are a ``TypeError`` with close matches; the params are built once so
    that a bad value fails here, not at the first make."""
    fields = [f.name for f in dataclasses.fields(definition.params_type)]
    options = [*MAKE_OPTIONS_IN_KWARGS, *([] if single_agent else ["preset"])]
    unknown = [k for k in kwargs if k not in fields and k not in options]
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, fields + options, n=1)
            hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise TypeError(
            f"register({env_id!r}): unknown kwargs {', '.join(hints)}; kwargs are fields of "
            f"{definition.params_type.__name__} ({', '.join(fields)}) and {', '.join(options)}"
            "; choose autoreset_mode, max_episode_steps etc. elsewhere (make_vec's own "
            "arguments, register's max_episode_steps)")
    params = {k: v for k, v in kwargs.items() if k in fields}
    try:
        if single_agent:
            definition.make_params(**params)
        else:
            definition.make_params(kwargs.get("preset"), **params)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"register({env_id!r}): kwargs {params}: {exc}") from None
    if "backend" in kwargs:
        from gpu_vecenv.backends import BACKENDS

        if kwargs["backend"] not in BACKENDS:
            raise ValueError(f"register({env_id!r}): backend must be one of {BACKENDS}, got "
                             f"{kwargs['backend']!r}")


def _check_time_limit(env_id: str, definition: Any, single_agent: bool,
                      max_episode_steps: Any) -> None:
    if max_episode_steps is None:
        if not single_agent:
            return
    elif (isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, int)
          or max_episode_steps < 1):
        raise ValueError(f"register({env_id!r}): max_episode_steps must be a positive int "
                         f"or None, got {max_episode_steps!r}")
    if not single_agent and "episode_length" not in {
            f.name for f in dataclasses.fields(definition.params_type)}:
        raise TypeError(f"register({env_id!r}): max_episode_steps of a multi-agent env sets "
                        f"its params' episode_length, which "
                        f"{definition.params_type.__name__} lacks")


# -- making envs --


def vector_env_class(definition: Any) -> type:
    """The runtime class of ``definition``: ``GpuVectorEnv`` or ``MultiAgentVectorEnv``."""
    if _is_single_agent(definition):
        from gpu_vecenv.vector_env import GpuVectorEnv

        return GpuVectorEnv
    from gpu_vecenv.multi_agent import MultiAgentVectorEnv

    return MultiAgentVectorEnv


def make_vec(env_id: str, num_envs: int = 1, **kwargs: Any):
    """Make the vector env of ``env_id`` (what ``gymnasium.make_vec`` calls).

    ``num_envs``: envs, or games of a multi-agent env. ``kwargs``: as for
    :class:`~gpu_vecenv.vector_env.GpuVectorEnv` (single-agent) or
    :class:`~gpu_vecenv.multi_agent.MultiAgentVectorEnv`; the id's registered ``kwargs``
    fill in what is not given."""
    entry = get_entry(env_id)
    kwargs = {**entry.kwargs, **kwargs}
    if entry.definition is None:
        import importlib

        module = importlib.import_module(entry.module)
        vector_cls = getattr(module, "VECTOR_ENV", None)
        if vector_cls is not None:
            env = vector_cls(num_envs=num_envs, **kwargs)
        else:
            from gpu_vecenv.vector_env import GpuVectorEnv

            env = GpuVectorEnv(module.DEFINITION, num_envs, **kwargs)
    else:
        definition = entry.definition
        if _is_single_agent(definition):
            kwargs.setdefault("max_episode_steps", entry.max_episode_steps)
        elif entry.max_episode_steps is not None and "episode_length" not in kwargs:
            kwargs.setdefault("max_episode_steps", entry.max_episode_steps)
        env = vector_env_class(definition)(definition, num_envs, **kwargs)
    env.env_id = env_id
    return env


def multi_agent_message(env_id: str) -> str:
    """What to use instead of ``gymnasium.make`` for a multi-agent id."""
    return (f"{env_id} is a multi-agent env (several agents per game); gymnasium.make "
            f"builds a single-agent Env. Use gymnasium.make_vec({env_id!r}, num_envs=G) "
            f"(one vector slot per agent), gpu_vecenv.parallel_env({env_id!r}, num_games=G) "
            f"(a batched PettingZoo ParallelEnv of tensors), or "
            f"gpu_vecenv.adapters.pettingzoo.parallel_env({env_id!r}) (one game, numpy)")


def make_single(env_id: str, **kwargs: Any):
    """A one-env ``gymnasium.Env`` view of ``env_id`` (what ``gymnasium.make`` calls)."""
    entry = get_entry(env_id)
    if not _is_single_agent(load_definition(env_id)):
        # A game of many agents is not one gymnasium.Env: its agents act at once and
        # leave one by one, which PettingZoo's ParallelEnv expresses and Env cannot.
        raise TypeError(multi_agent_message(entry.id))
    from gpu_vecenv.single_env import SingleEnvView

    return SingleEnvView(env_id, **{**entry.kwargs, **kwargs})


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
    if _is_single_agent(definition):
        if env.max_episode_steps != get_entry(env_id).max_episode_steps:
            kwargs["max_episode_steps"] = env.max_episode_steps
    return env_id, kwargs


def make_vec_params(env_id: str) -> Any:
    """The params dataclass that ``make_vec(env_id)`` builds when given no parameters."""
    entry = get_entry(env_id)
    definition = load_definition(env_id)
    fields = {f.name for f in dataclasses.fields(definition.params_type)}
    params = {k: v for k, v in entry.kwargs.items() if k in fields}
    if _is_single_agent(definition):
        return definition.make_params(**params)
    if entry.max_episode_steps is not None:
        params.setdefault("episode_length", entry.max_episode_steps)
    return definition.make_params(entry.kwargs.get("preset"), **params)


def __getattr__(name: str):
    for prefix, maker in (("vector_", make_vec), ("single_", make_single)):
        if name.startswith(prefix) and name[len(prefix):] in ENVS:
            return partial(maker, name[len(prefix):])
    raise AttributeError(f"module 'gpu_vecenv.registration' has no attribute {name!r}")


__all__ = ["RegistrationError", "make_kwargs_of", "make_single", "make_vec",
           "make_vec_params", "register", "register_envs", "vector_env_class"]
