"""Integer constants read from the kernel sources, so each is written once, in C.

A layout fact both sides need (how many features an observation holds per other agent,
the ids of a step's phases, the largest block) is declared in ``cuda_src/`` and Python
reads the text: no compiler or GPU is needed, so the torch reference on a CPU sizes its
observations from the same number the kernel uses. Understood forms, one per line:

- ``#define NAME 123``
- ``constexpr int NAME = 123;``
- ``enum Name { kA = 0, kB, kC };`` (values as C assigns them)
"""

from __future__ import annotations

import functools
import re

from gpu_vecenv.backends.compiler import CUDA_SRC

_DEFINE = re.compile(r"^\s*#define\s+(\w+)\s+(-?\d+)\s*(?://.*)?$", re.MULTILINE)
_CONSTEXPR = re.compile(r"^\s*constexpr\s+int\s+(\w+)\s*=\s*(-?\d+)\s*;", re.MULTILINE)
_ENUM = re.compile(r"\benum\s+(\w+)\s*\{([^}]*)\}", re.DOTALL)


@functools.cache
def _source(file: str) -> str:
    return (CUDA_SRC / file).read_text()


def int_constant(file: str, name: str) -> int:
    """The value of ``name`` (a ``#define`` or ``constexpr int``) in ``cuda_src/<file>``."""
    text = _source(file)
    for pattern in (_DEFINE, _CONSTEXPR):
        for found, value in pattern.findall(text):
            if found == name:
                return int(value)
    raise LookupError(f"cuda_src/{file} declares no integer constant {name}")


def enum_values(file: str, enum: str) -> dict[str, int]:
    """The enumerators of ``enum`` in ``cuda_src/<file>``, name -> value."""
    for found, body in _ENUM.findall(_source(file)):
        if found != enum:
            continue
        values, next_value = {}, 0
        for item in re.sub(r"//[^\n]*", "", body).split(","):
            if not item.strip():
                continue
            name, _, given = item.partition("=")
            next_value = int(given) if given.strip() else next_value
            values[name.strip()] = next_value
            next_value += 1
        return values
    raise LookupError(f"cuda_src/{file} declares no enum {enum}")
