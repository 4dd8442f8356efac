"""How an env's params become the constant argument of its kernels: :class:`KernelBinding`,
declared in the env's own module (``envs/cartpole.py``) beside the torch reference.

The C side declares the same constants once, as a field list (``GV_CONSTS`` in
``cuda_src/common/consts.cuh``), and its kernel file exports their layout as the text
``<source>_consts_layout``: ``"float gravity;float masspole;...;int euler;"``. The CUDA
backend compares that text with the binding's fields at load (:func:`check_layout`), so a
constant added, moved or retyped on one side only is an error naming the env, the field
and both sides, not every later constant silently shifted by one.

Importing this module needs neither torch nor a GPU.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Consts = list[tuple[str, Any]]
"""``[(field name, np.float32 or int), ...]`` in the order of the C ``Consts`` struct; an
element of a C array field ``float torque[3]`` is named ``"torque[0]"``."""


def f32(value: float) -> np.float32:
    """A Python float rounded to float32, as torch does with a scalar operand."""
    return np.float32(value)


def reciprocal(value: float) -> np.float32:
    """The factor by which torch's CUDA kernels multiply for ``tensor / value`` (a Python
    float): ``at::native::div_true_kernel_cuda`` replaces division by a CPU scalar with
    multiplication by its reciprocal, and torch 2.11 forms that reciprocal in double and
    rounds it to float32 once. (Measured on the H200 over 2**20 values: this matches torch
    where ``1.0f / float(value)`` differs in 79% and true float32 division in 62%.)"""
    return np.float32(1.0 / value)


def _is_float(value: Any) -> bool:
    """Packed as a C float (else as an int): the binding rounds floats to np.float32."""
    return isinstance(value, np.floating)


class KernelLayoutError(RuntimeError):
    """An env's Python binding and its kernel file disagree on the constants."""


@dataclass(frozen=True)
class KernelBinding:
    """An env's kernels and the constants they take.

    ``source`` names the kernels (``<source>_step``, ``_reset``, ``_observe``) and their
    file, ``cuda_src/<source>.cu`` unless ``path`` is given (a custom env's);
    ``consts(params)`` returns the fields of the C ``Consts`` struct in order (:data:`Consts`),
    each float rounded to float32 the way the torch reference rounds it.
    """

    source: str
    consts: Callable[[Any], Consts]
    path: str | None = None
    """A kernel file outside ``cuda_src/`` (a custom env's); ``None``: ``cuda_src/<source>.cu``."""

    def pack_format(self, params: Any) -> tuple[str, tuple[Any, ...]]:
        """:mod:`struct` format and values of the ``Consts`` struct."""
        fields = self.consts(params)
        fmt = "".join("f" if _is_float(v) else "i" for _, v in fields)
        return fmt, tuple(float(v) if _is_float(v) else int(v) for _, v in fields)

    def fields(self, params: Any) -> list[tuple[str, str]]:
        """``[(C type, name), ...]`` of what :meth:`pack_format` packs: ``float`` for a
        float32, ``int`` for an int."""
        return [("float" if _is_float(v) else "int", name) for name, v in self.consts(params)]

    @property
    def kernel_file(self) -> str:
        """The kernel file, as an error message names it."""
        return self.path or f"cuda_src/{self.source}.cu"

    @property
    def consts_name(self) -> str:
        """The Python function that packs the constants, as an error message names it."""
        return f"{getattr(self.consts, '__module__', '?')}." \
               f"{getattr(self.consts, '__qualname__', repr(self.consts))}"


_C_FIELD = re.compile(r"^(\w+) (\w+)(?:\[(\d+)\])?$")


def parse_layout(text: str) -> list[tuple[str, str]]:
    """``[(C type, name), ...]`` of a kernel file's ``<source>_consts_layout`` text, an
    array field ``float torque[3]`` expanded to ``torque[0]``, ``torque[1]``, ``torque[2]``.

    >>> parse_layout("float gravity;float torque[2];int euler;")
    [('float', 'gravity'), ('float', 'torque[0]'), ('float', 'torque[1]'), ('int', 'euler')]
    """
    fields = []
    for declaration in filter(None, text.split(";")):
        match = _C_FIELD.match(declaration.strip())
        if match is None:
            raise ValueError(f"not a field of a constant layout: {declaration!r}")
        kind, name, count = match.groups()
        if count is None:
            fields.append((kind, name))
        else:
            fields += [(kind, f"{name}[{k}]") for k in range(int(count))]
    return fields


def _listing(fields: list[tuple[str, str]]) -> str:
    return "; ".join(f"{kind} {name}" for kind, name in fields) or "(none)"


def check_layout(env_name: str, binding: KernelBinding, params: Any, c_text: str) -> None:
    """Compare the fields ``binding`` packs for ``params`` with the kernel file's layout
    text ``c_text``; see :func:`compare_layouts`."""
    compare_layouts(env_name, parse_layout(c_text), binding.fields(params),
                    binding.kernel_file, binding.consts_name, "GV_CONSTS(...)")


def compare_layouts(env_name: str, c: list[tuple[str, str]], python: list[tuple[str, str]],
                    kernel_file: str, binding_name: str, c_list: str) -> None:
    """Compare a kernel file's constants ``c`` (its exported layout, parsed) with the
    fields its Python binding packs, ``python``; both ``[(C type, name), ...]`` in order.
    Single- and multi-agent bindings share it.

    Raises:
        KernelLayoutError: they differ; the message names the env, the first field that
            differs (its position and both sides' declaration) and lists both sides.
    """
    if python == c:
        return
    position = next(k for k in range(max(len(python), len(c)))
                    if k >= len(python) or k >= len(c) or python[k] != c[k])

    def at(fields: list[tuple[str, str]]) -> str:
        return f"'{' '.join(fields[position])}'" if position < len(fields) else "nothing"

    raise KernelLayoutError(
        f"{env_name}: the kernel constants of {kernel_file} and of its binding "
        f"{binding_name} differ at field {position}: the kernel file declares "
        f"{at(c)}, the binding packs {at(python)}. Change both sides together (the C list "
        f"is {c_list} in the kernel file).\n"
        f"  {kernel_file} ({len(c)} fields): {_listing(c)}\n"
        f"  {binding_name} ({len(python)} fields): {_listing(python)}"
    )
