"""Building a validated :class:`~gpu_vecenv.train.config.Config`: YAML files (a path or
a shipped config's name, :mod:`.shipped_configs`), ``section.key=value`` overrides, and the
checks (each value converted to its field's type by :mod:`.config_values`, ranges by
:mod:`.config_ranges`, ``trainer.env_kwargs`` by :mod:`.env_kwargs`).

Everything is validated before a run starts: an unknown key, a value of the wrong type
or an unknown env id raises a ``ValueError``/``TypeError`` naming the key.
"""

from __future__ import annotations

import dataclasses
import io
import typing
from pathlib import Path
from typing import Any

from gpu_vecenv.train.config import (
    ALGO_CONFIGS,
    SECTIONS,
    Config,
    DDPGConfig,
    PolicySpec,
)
from gpu_vecenv.train.config_values import coerce

# -- validation --


def build_section(cls: type, values: dict[str, Any], section: str) -> Any:
    """An instance of dataclass ``cls`` from ``values``, every key and type checked."""
    if not isinstance(values, dict):
        raise TypeError(f"section {section!r} must be a mapping, got {values!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        import difflib

        hints_text = "".join(
            f" (did you mean {section}.{m[0]}?)" for k in unknown
            if (m := difflib.get_close_matches(k, names, n=1))
        )
        raise ValueError(f"unknown key(s) {', '.join(f'{section}.{k}' for k in unknown)}"
                         f"{hints_text}; valid keys: {', '.join(names)}")
    kwargs = {k: coerce(v, hints[k], f"{section}.{k}") for k, v in values.items()}
    return cls(**kwargs)


def config_from_dict(raw: dict[str, Any]) -> Config:
    """Validate a nested dict (YAML layout) into a :class:`Config`."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise TypeError(f"a config must be a mapping of sections, got {type(raw).__name__}")
    # ``distributed``: how a data-parallel run was launched (run_directory.record_world_size).
    unknown = sorted(set(raw) - {*SECTIONS, "policies", "distributed"})
    if unknown:
        raise ValueError(f"unknown section(s) {unknown}; valid: "
                         f"{', '.join([*SECTIONS, 'policies'])}")
    sections = {name: build_section(cls, raw.get(name) or {}, name)
                for name, cls in SECTIONS.items()}
    algo = sections["trainer"].algo
    policies = {}
    raw_policies = raw.get("policies") or {}
    if not isinstance(raw_policies, dict):
        raise TypeError(f"policies must be a mapping of name -> {{agents: [...]}}, "
                        f"got {raw_policies!r}")
    for name, spec in raw_policies.items():
        where = f"policies.{name}"
        if not isinstance(spec, dict):
            raise TypeError(f"{where} must be a mapping with key 'agents'")
        extra = sorted(set(spec) - {"agents", *ALGO_CONFIGS})
        if extra:
            raise ValueError(f"unknown key(s) {extra} in {where}; valid: agents, "
                             f"{', '.join(ALGO_CONFIGS)}")
        if "agents" not in spec:
            raise ValueError(f"{where} needs 'agents': a list of roles or agent ids")
        agents = spec["agents"]
        agents = [agents] if isinstance(agents, (str, int)) else agents
        agents = coerce(agents, list[str | int], f"{where}.agents")
        if not agents:
            raise ValueError(f"{where}.agents is empty")
        overrides = spec.get(algo) or {}
        checked = build_section(ALGO_CONFIGS[algo], overrides, f"{where}.{algo}")
        policies[name] = PolicySpec(
            agents=agents, overrides={k: getattr(checked, k) for k in overrides})
    config = Config(**sections, policies=policies)
    validate(config)
    return config


def validate(config: Config) -> None:
    """Checks across fields, every number in its range (:mod:`.config_ranges`), that the
    env id exists and that ``trainer.env_kwargs`` fit the env's parameters (its params
    are built, no env is)."""
    from gpu_vecenv.env_ids import get_entry
    from gpu_vecenv.train.config_ranges import check_ranges
    from gpu_vecenv.train.env_kwargs import checked_env_kwargs

    t = config.trainer
    get_entry(t.env)
    check_ranges(t, "trainer")
    t.env_kwargs = checked_env_kwargs(t.env, t.env_kwargs)
    t.stop_at_return = _checked_stop_at_return(t.stop_at_return, list(config.policies))
    names = list(config.policies) or ["default"]
    for name in names:
        c = config.policy_config(name)
        where = t.algo if name == "default" else f"policies.{name}.{t.algo}"
        if any(h < 1 for h in c.hidden_sizes):
            raise ValueError(f"{where}.hidden_sizes must be positive, got {c.hidden_sizes}")
        check_ranges(c, where)
        if isinstance(c, DDPGConfig) and c.buffer_size < c.batch_size:
            raise ValueError(f"{where}: need batch_size <= buffer_size, got "
                             f"{c.batch_size} > {c.buffer_size}")


def _checked_stop_at_return(value: Any, policies: list[str]) -> float | dict | None:
    """``trainer.stop_at_return`` with its thresholds as floats. Whether a number or a
    mapping fits the run's policies is checked by the trainer, which knows them all (a
    multi-agent env without a ``policies`` section gets one policy per role)."""
    if not isinstance(value, dict):
        return value
    if not value:
        raise ValueError("trainer.stop_at_return is an empty mapping; give policy: threshold "
                         "pairs, a number, or null")
    checked = {}
    for name, threshold in value.items():
        checked[str(name)] = coerce(threshold, float, f"trainer.stop_at_return.{name}")
    unknown = sorted(set(checked) - set(policies)) if policies else []
    if unknown:
        raise ValueError(f"trainer.stop_at_return names unknown policies {unknown}; "
                         f"policies: {', '.join(policies)}")
    return checked


# -- YAML and overrides --


def _yaml():
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - pyyaml is in the train extra
        raise RuntimeError("YAML configs need PyYAML: pip install 'gpu-vecenv[train]'") from exc
    return yaml


def _unique_key_loader() -> type:
    """PyYAML's safe loader, refusing a key written twice in one mapping (PyYAML keeps
    the last silently: ``seed: 1`` then ``seed: 2`` would train with 2 and no word).
    Keys that a merge (``<<: *base``) brings in may still be overridden."""
    yaml = _yaml()

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # an unhashable key: the safe loader refuses it itself
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (first on line {first + 1})",
                        key_node.start_mark)
                seen[key] = key_node.start_mark.line
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


def load_yaml(path: str | Path) -> dict[str, Any]:
    """The raw nested dict of a YAML file. Every error names the file: missing, a
    folder, unreadable, not UTF-8, not YAML, a key twice, not a mapping."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"config file {path} is a directory")
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    yaml = _yaml()
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"config file {path} is not UTF-8 text (byte "
                         f"{exc.object[exc.start]:#04x} at offset {exc.start})") from None
    except OSError as exc:
        raise ValueError(f"config file {path} cannot be read: {exc.strerror}") from None
    stream = io.StringIO(text)
    stream.name = str(path)  # the file, not "<unicode string>", in YAML's messages
    try:
        raw = yaml.load(stream, Loader=_unique_key_loader())  # a SafeLoader
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a mapping of sections, got {type(raw).__name__}")
    return raw


def parse_value(text: str) -> Any:
    """A command-line value in YAML syntax (``3``, ``0.1``, ``true``, ``[64, 64]``); text
    that is no YAML stays a string, a mapping with a key twice is an error."""
    yaml = _yaml()
    try:
        return yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader
    except yaml.constructor.ConstructorError as exc:
        if "duplicate key" in str(exc):
            raise ValueError(f"{text!r}: {exc.problem}") from None
        return text
    except Exception:
        return text


def apply_override(raw: dict[str, Any], assignment: str) -> None:
    """Apply ``"section.key=value"`` (any depth: ``policies.tagger.ppo.learning_rate=1e-3``)
    to the nested dict ``raw`` in place."""
    if "=" not in assignment:
        raise ValueError(f"--set expects section.key=value, got {assignment!r}")
    path, text = assignment.split("=", 1)
    keys = path.strip().split(".")
    if len(keys) < 2 or not all(keys):
        raise ValueError(f"--set expects section.key=value, got {assignment!r}")
    node = raw
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ValueError(f"--set {path}: {key!r} is not a section")
        node = child
    node[keys[-1]] = parse_value(text)


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    **trainer: Any,
) -> Config:
    """Build a validated :class:`Config`: defaults, then the YAML file at ``path`` (a
    file, or the name of a shipped config such as ``"cartpole_ppo"``), then ``overrides``
    (``"section.key=value"``), then ``trainer`` keyword values."""
    from gpu_vecenv.train.shipped_configs import resolve_config_path

    raw = load_yaml(resolve_config_path(path)) if path is not None else {}
    for assignment in overrides:
        apply_override(raw, assignment)
    if trainer:
        section = raw.setdefault("trainer", {})
        if not isinstance(section, dict):
            raise TypeError("section 'trainer' must be a mapping")
        section.update(trainer)
    return config_from_dict(raw)


def save_yaml(config: Config, path: str | Path) -> None:
    """Write the resolved config (every key, defaults included)."""
    text = _yaml().safe_dump(config.to_dict(), sort_keys=False)
    Path(path).write_text(text)
