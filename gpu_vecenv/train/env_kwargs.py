"""``trainer.env_kwargs`` checked against the env's parameters when a config is loaded.

A key is a field of the env's params dataclass (``gravity`` of ``CartPoleParams``) or a
keyword of its vector env (``max_episode_steps``, ``strict``, ``preset``, ...). A field's
value is converted to the field's type (``int``, ``float``, ``bool``, ``str``, a tuple of
them) or refused, a float must be finite, and the params are then built as
:func:`gpu_vecenv.make_vec` builds them, so the env's own checks run too; all before an
env exists. Errors name the key: ``trainer.env_kwargs.gravity must be a number, got
'heavy'``. The vector env checks its own keywords when it is made.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from typing import Any, Literal

from gpu_vecenv.entry_points import is_single_agent, vector_env_class
from gpu_vecenv.env_ids import get_entry, load_definition
from gpu_vecenv.train.config_values import coerce

SET_BY_THE_TRAINER = {"device": "trainer.device", "backend": "trainer.backend",
                      "autoreset_mode": "the trainer (SameStep)", "copy": "the trainer",
                      "num_envs": "trainer.num_envs", "num_games": "trainer.num_envs"}
"""Keywords of ``make_vec`` that the trainer passes itself: where each is set instead."""

_SCALARS = (bool, int, float, str)


def checked_env_kwargs(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with every params field converted to its type; raises ``TypeError``
    (unknown key, wrong type) or ``ValueError`` (a value the params refuse) naming it."""
    clash = sorted(set(kwargs) & set(SET_BY_THE_TRAINER))
    if clash:
        raise ValueError("; ".join(f"trainer.env_kwargs.{key} is set by "
                                   f"{SET_BY_THE_TRAINER[key]}, not here" for key in clash))
    definition = load_definition(env_id)
    params_type = definition.params_type
    fields = [f.name for f in dataclasses.fields(params_type)]
    hints = _type_hints(params_type)
    keywords = _keywords(vector_env_class(definition))
    _check_names(env_id, params_type, kwargs, keywords - set(SET_BY_THE_TRAINER))
    checked = {key: (_converted(value, hints.get(key), f"trainer.env_kwargs.{key}")
                     if key in fields else value) for key, value in kwargs.items()}
    _build_params(env_id, definition, checked)
    return checked


def _check_names(env_id: str, params_type: type, kwargs: dict[str, Any],
                 keywords: set[str]) -> None:
    """``TypeError`` naming the keys that are neither params fields nor ``keywords``."""
    from gpu_vecenv.definition import check_parameter_names

    unknown = {k: v for k, v in kwargs.items() if k not in keywords}
    try:
        check_parameter_names(env_id, params_type, unknown)
    except TypeError as exc:
        raise TypeError(f"trainer.env_kwargs: {exc}; or a keyword of the vector env: "
                        f"{', '.join(sorted(keywords))}") from None


def _keywords(vector_cls: type) -> set[str]:
    """The named keyword parameters of ``vector_cls.__init__`` (``GpuVectorEnv`` or
    ``MultiAgentVectorEnv``, whose ``**params`` are the params' fields)."""
    parameters = inspect.signature(vector_cls.__init__).parameters.values()
    return {p.name for p in parameters
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)} - {"self", "definition"}


def _type_hints(params_type: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(params_type)
    except Exception:  # a custom env's annotation that does not resolve: no conversion
        return {}


def _converted(value: Any, hint: Any, where: str) -> Any:
    """``value`` as the field type ``hint``, by the config's own rules (ints are ints,
    floats finite, bools true or false); a type the config does not know (a tensor, a
    nested dataclass) is left to the env."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and args and Ellipsis not in args:
        if not all(a in _SCALARS for a in args):
            return value
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise TypeError(f"{where} must be a list of {len(args)} values, got {value!r}")
        return tuple(coerce(v, a, f"{where}[{i}]")
                     for i, (v, a) in enumerate(zip(value, args, strict=True)))
    return coerce(value, hint, where) if _known(hint) else value


def _known(hint: Any) -> bool:
    """Whether the config's coercion handles ``hint``: a scalar, a ``Literal``, a
    ``tuple[scalar, ...]``, or a union of these and ``None``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in _SCALARS or origin is Literal:
        return True
    if origin is tuple:
        return len(args) == 2 and args[0] in _SCALARS and args[1] is Ellipsis
    if origin in (typing.Union, types.UnionType):
        return all(a is type(None) or _known(a) for a in args)
    return False


def _build_params(env_id: str, definition: Any, kwargs: dict[str, Any]) -> None:
    """Build the params as ``make_vec`` does (the id's registered kwargs, then ours), so
    the params' own checks run; their error is prefixed with ``trainer.env_kwargs``."""
    entry = get_entry(env_id)
    names = {f.name for f in dataclasses.fields(definition.params_type)}
    merged = {**entry.kwargs, **kwargs}
    params = {k: v for k, v in merged.items() if k in names}
    try:
        if is_single_agent(definition):
            definition.make_params(**params)
            return
        steps = merged.get("max_episode_steps", entry.max_episode_steps)
        if steps is not None:
            params.setdefault("episode_length", steps)
        definition.make_params(merged.get("preset"), **params)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"trainer.env_kwargs: {exc}") from None
