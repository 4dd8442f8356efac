"""One value of a config converted to its field's type, or an error naming the key.

The rules of YAML files, ``--set`` overrides and ``trainer.env_kwargs`` alike: ints are
ints (``4.0`` is 4, ``4.5`` is refused), floats are finite numbers (``"3e-4"``, a string
to PyYAML, is read as one), bools are ``true`` or ``false``, ``null`` fills an optional
field, a ``Literal`` is one of its choices, a tuple or list is a YAML list.
"""

from __future__ import annotations

import math
import types
import typing
from typing import Any, Literal


def type_name(hint: Any) -> str:
    """A short readable name of a type hint (for help and errors)."""
    origin = typing.get_origin(hint)
    if origin is Literal:
        return "{" + ",".join(str(a) for a in typing.get_args(hint)) + "}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in typing.get_args(hint))
    if origin is tuple:
        return f"list of {type_name(typing.get_args(hint)[0])}"
    if hint is type(None):
        return "null"
    return getattr(hint, "__name__", str(hint))


class NotFiniteError(ValueError):
    """A number that is NaN or infinite where a finite one is needed."""


def coerce(value: Any, hint: Any, where: str) -> Any:
    """``value`` converted to ``hint`` or a TypeError/ValueError naming ``where``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None or (isinstance(value, str) and value.lower() in ("null", "none")):
            if type(None) in args:
                return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(value, arg, where)
            except (TypeError, ValueError) as exc:
                errors.append(exc)
        for exc in errors:
            if isinstance(exc, NotFiniteError):
                raise exc  # a number is allowed, just not this one
        raise TypeError(f"{where} must be {_expected(args)}, got {value!r}")
    if origin is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            raise ValueError(f"{where} must be one of {list(choices)}, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where} must be a list, got {value!r}")
        item = typing.get_args(hint)[0]
        return tuple(coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where} must be a list, got {value!r}")
        item = typing.get_args(hint)[0]
        return [coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise TypeError(f"{where} must be true or false, got {value!r}")
    if hint is int:
        if isinstance(value, str):
            value = _number(value, where, hint)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where} must be an int, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, str):
            value = _number(value, where, hint)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{where} must be a number, got {value!r}")
        if not math.isfinite(value):  # YAML reads .nan and .inf as floats
            raise NotFiniteError(f"{where} must be a finite number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise TypeError(f"{where} must be a string, got {value!r}")
        return value
    if hint is dict or origin is dict:
        if not isinstance(value, dict):
            raise TypeError(f"{where} must be a mapping, got {value!r}")
        return dict(value)
    raise TypeError(f"{where}: unsupported type {hint!r}")


def _expected(args: tuple) -> str:
    """What a union of ``args`` accepts, in words where each member has some (``an int or
    auto``), else its type name (``float or dict or null``)."""
    words = {int: "an int", float: "a number", type(None): "null"}
    if all(a in words or typing.get_origin(a) is Literal for a in args):
        return " or ".join(words.get(a) or "/".join(map(str, typing.get_args(a)))
                           for a in args)
    return " or ".join(type_name(a) for a in args)


def _number(text: str, where: str, hint: type) -> float:
    # PyYAML reads "3e-4" (no dot) as a string; accept any Python float literal.
    try:
        return float(text)
    except ValueError:
        raise TypeError(f"{where} must be {'an int' if hint is int else 'a number'}, "
                        f"got {text!r}") from None
