"""The config's help text: each field's docstring (CleanRL style: the text under a
field of :mod:`gpu_vecenv.train.config` is its help), ``gpu-vecenv train --help-config``
and ``--print-config``.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import tempfile
import textwrap
import typing
from pathlib import Path

from gpu_vecenv.train.config import SECTIONS, Config
from gpu_vecenv.train.config_loading import save_yaml
from gpu_vecenv.train.config_values import type_name


def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` read from the string literal under each field."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, following in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            docs[node.target.id] = following.value.value.strip()
    return docs


def config_yaml(config: Config) -> str:
    """``config`` as the YAML file a run saves (every key, defaults included):
    ``--print-config``."""
    with tempfile.TemporaryDirectory() as tmp:
        save_yaml(config, Path(tmp) / "config.yaml")
        return (Path(tmp) / "config.yaml").read_text()


def config_help(config: Config, args: argparse.Namespace) -> str:
    """Every key of the sections this run uses (``trainer``, its algorithm), each with
    the value this command line resolves to, its type and meaning."""
    t = config.trainer
    source = (f"the run in {args.resume}" if args.resume else f"config {args.config}"
              if args.config else f"--env {t.env} (its shipped config)")
    lines = textwrap.wrap(f"Config keys, with the values for {source}. Set any of them with "
                          "--set SECTION.KEY=VALUE (YAML syntax: true, null, [64, 64]).", 96)
    lines.append("")
    for section in ("trainer", t.algo):
        cls = SECTIONS[section]
        hints = typing.get_type_hints(cls)
        docs = field_docs(cls)
        title = (cls.__doc__ or "").strip().splitlines()[0]
        lines.append(f"{section}: {re.sub(r' [(]section ``[a-z0-9]+``[)]', '', title)}")
        values = getattr(config, section)
        for f in dataclasses.fields(cls):
            value = getattr(values, f.name)
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            note = "" if value == default else f"; built-in default {_yaml_value(default)}"
            lines.append(f"  {section}.{f.name} = {_yaml_value(value)}  "
                         f"({type_name(hints[f.name])}{note})")
            doc = " ".join(docs.get(f.name, "").split()).replace("``", "").replace("`", "")
            lines += textwrap.wrap(doc, 96, initial_indent="      ", subsequent_indent="      ")
        lines.append("")
    others = [name for name in ("ppo", "a2c", "ddpg") if name != t.algo]
    lines.append("policies: multi-agent runs: policy name -> agents (roles or ids) and")
    lines.append("  overrides of the algorithm's keys (docs/training.md, Multi-agent).")
    lines.append(f"The keys of {' and '.join(others)}: add --algo {others[0]} "
                 f"(or --algo {others[1]}) --help-config.")
    return "\n".join(lines) + "\n"


def _yaml_value(value) -> str:
    """A value as written in YAML / --set: ``null``, ``true``, ``[64, 64]``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    return str(value)
