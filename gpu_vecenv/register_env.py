"""``gpu_vecenv.register``: give a user's env definition an id, in gpu_vecenv's table and in
Gymnasium's, so that ``gpu_vecenv.make_vec``, ``gymnasium.make_vec``, the trainer and
every adapter can make it by id. Follows ``gymnasium.register`` (id format, time limit,
default kwargs), except that taking an id that is in use needs ``override=True``.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

import gymnasium as gym

from gpu_vecenv.entry_points import register_with_gymnasium
from gpu_vecenv.env_ids import ENVS, EnvEntry, is_single_agent

_FROM_DEFINITION: Any = object()

MAKE_OPTIONS_IN_KWARGS = ("device", "backend")
"""Options of ``make_vec`` that ``register(kwargs=...)`` may preset besides the env's
parameters (and a multi-agent env's ``preset``); the others (autoreset mode, copy, ...)
are the caller's choice at each ``make_vec``."""


class RegistrationError(gym.error.RegistrationError, ValueError):
    """An id that cannot be registered: malformed, or taken (pass ``override=True``)."""


def register(
    id: str,  # Gymnasium's name for it
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
            :class:`~gpu_vecenv.multi_agent.MultiAgentDefinition`.
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
        The new :class:`~gpu_vecenv.env_ids.EnvEntry`.

    Raises:
        RegistrationError: a malformed id, or one already taken (by another definition
            or other arguments, or by a Gymnasium env) without ``override=True``.
        TypeError, ValueError: a definition of the wrong type, unknown or invalid
            ``kwargs``, a bad ``max_episode_steps``.
    """
    full_id = _checked_id(id)
    single_agent = is_single_agent(definition)
    kwargs = dict(kwargs or {})
    _check_kwargs(full_id, definition, single_agent, kwargs)
    if max_episode_steps is _FROM_DEFINITION:
        max_episode_steps = definition.max_episode_steps if single_agent else None
    _check_time_limit(full_id, definition, single_agent, max_episode_steps)
    entry = EnvEntry(
        full_id, None, max_episode_steps, reward_threshold, summary, definition, kwargs
    )
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
            what = (
                f"by module {existing.module}"
                if existing.module
                else f"for definition {existing.definition.name!r}"
            )
            raise RegistrationError(
                f"env id {full_id!r} is already registered ({what}, max_episode_steps="
                f"{existing.max_episode_steps}, kwargs={existing.kwargs}); pass "
                f"override=True to replace it, or register a new version, e.g. "
                f"{_next_version(full_id)!r}"
            )
        if full_id in gym.registry:
            raise RegistrationError(
                f"env id {full_id!r} is already a Gymnasium env (entry point "
                f"{gym.registry[full_id].entry_point}); pass override=True to replace it"
            )
    # The caller asked for the replacement: spare them Gymnasium's "Overriding" warning.
    previous_spec = gym.registry.pop(full_id, None)
    try:
        register_with_gymnasium(entry)
    except Exception:
        if previous_spec is not None:
            gym.registry[full_id] = previous_spec
        raise
    ENVS[full_id] = entry
    return entry


def _reloaded(existing: EnvEntry, new: EnvEntry) -> bool:
    """``new`` is ``existing`` but for a definition built again by the same code."""
    if (
        existing.definition is None
        or dataclasses.replace(existing, definition=new.definition) != new
    ):
        return False

    def origin(definition: Any) -> tuple:
        params = definition.params_type
        return type(definition), definition.name, params.__module__, params.__qualname__

    return origin(existing.definition) == origin(new.definition)


def _checked_id(env_id: Any) -> str:
    """``env_id`` as Gymnasium will store it (with the current namespace, if any)."""
    from gymnasium.envs import registration as gym_registration

    if not isinstance(env_id, str):
        raise TypeError(f"env id must be a str, got {type(env_id).__name__}")
    if ":" in env_id:
        raise RegistrationError(
            f"malformed env id {env_id!r}: ':' separates a module from an id "
            "('my_module:MyEnv-v0', to make an env its module registers) and cannot be "
            "part of one"
        )
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


def _check_kwargs(env_id: str, definition: Any, single_agent: bool, kwargs: dict[str, Any]) -> None:
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
            "arguments, register's max_episode_steps)"
        )
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
            raise ValueError(
                f"register({env_id!r}): backend must be one of {BACKENDS}, got "
                f"{kwargs['backend']!r}"
            )


def _check_time_limit(
    env_id: str, definition: Any, single_agent: bool, max_episode_steps: Any
) -> None:
    if max_episode_steps is None:
        if not single_agent:
            return
    elif (
        isinstance(max_episode_steps, bool)
        or not isinstance(max_episode_steps, int)
        or max_episode_steps < 1
    ):
        raise ValueError(
            f"register({env_id!r}): max_episode_steps must be a positive int "
            f"or None, got {max_episode_steps!r}"
        )
    if not single_agent and "episode_length" not in {
        f.name for f in dataclasses.fields(definition.params_type)
    }:
        raise TypeError(
            f"register({env_id!r}): max_episode_steps of a multi-agent env sets "
            f"its params' episode_length, which "
            f"{definition.params_type.__name__} lacks"
        )


__all__ = ["MAKE_OPTIONS_IN_KWARGS", "RegistrationError", "register"]
