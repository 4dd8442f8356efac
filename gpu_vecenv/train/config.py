"""Training configuration: one dataclass per algorithm plus the run-level settings.

A run is described by :class:`Config` with sections ``trainer`` (:class:`TrainerConfig`),
``ppo``, ``a2c``, ``ddpg`` and ``policies`` (multi-agent: policy name -> agents and
per-policy overrides of the algorithm's settings). YAML files hold the same nesting;
``--set section.key=value`` (YAML value syntax) overrides any key. The field docstrings
below are the ``--help`` text.

Everything is validated before a run starts: an unknown key, a value of the wrong type
or an unknown env id raises a ``ValueError``/``TypeError`` naming the key.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal


@dataclass
class TrainerConfig:
    """Run-level settings (section ``trainer``)."""

    env: str = "GPUCartPole-v1"
    """registered env id (see `gpu-vecenv list`)"""
    algo: Literal["ppo", "a2c", "ddpg"] = "ppo"
    """algorithm: ppo, a2c or ddpg"""
    num_envs: int = 64
    """number of parallel envs (for a multi-agent env: games; slots = games x agents)"""
    total_steps: int = 500_000
    """env steps to train for, counted over all vector slots (agent-steps for Tag)"""
    seed: int = 1
    """seed of the envs, the network initialisation and the action sampling"""
    device: str = "auto"
    """torch device: auto (cuda if available, else cpu), cpu, cuda, cuda:1, ..."""
    backend: Literal["auto", "cuda", "torch"] = "auto"
    """env backend: auto, cuda (kernels) or torch (reference, any device)"""
    env_kwargs: dict = field(default_factory=dict)
    """parameters of the env (fields of its params dataclass), e.g. {num_taggers: 10}"""
    run_dir: str | None = None
    """output directory; default runs/<env>__<algo>__<seed>__<YYYYmmdd-HHMMSS>"""
    log_interval: int = 1
    """iterations between metric reads (each read is one host-device sync)"""
    checkpoint_interval: int = 20
    """iterations between checkpoints (0: only at the end)"""
    eval_episodes: int = 100
    """episodes of the deterministic policy evaluated after training (0: none)"""
    progress: bool = True
    """show a progress bar (only when stderr is a terminal)"""
    tensorboard: bool = True
    """write TensorBoard event files (needs the tensorboard package)"""
    torch_threads: int = 0
    """torch CPU threads; 0: 1 on a CPU device (small networks only lose from more), else
    torch's default"""
    sync_timing: bool = False
    """synchronize the GPU after roll-out and update so their logged times are exact"""


@dataclass
class PPOConfig:
    """Proximal policy optimization (section ``ppo``)."""

    num_steps: int = 32
    """roll-out length per env and iteration"""
    learning_rate: float = 2.5e-4
    """Adam learning rate"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the run"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    update_epochs: int = 4
    """passes over each roll-out"""
    num_minibatches: int = 4
    """minibatches per epoch (the roll-out is shuffled each epoch)"""
    clip_coef: float = 0.2
    """surrogate clipping epsilon"""
    clip_vloss: bool = True
    """clip the value loss around the roll-out values (with clip_coef)"""
    norm_adv: bool = True
    """normalize advantages per minibatch"""
    ent_coef: float = 0.0
    """entropy bonus coefficient"""
    vf_coef: float = 0.5
    """value loss coefficient"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip"""
    target_kl: float | None = None
    """stop the epochs of an iteration once the approximate KL exceeds this (null: never)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the actor and of the critic"""
    activation: Literal["tanh", "relu", "elu"] = "tanh"
    """hidden activation"""
    init_log_std: float = 0.0
    """initial log standard deviation of Box actions (a learned, state-free parameter)"""
    normalize_obs: bool = False
    """normalize observations by running mean and variance"""
    reward_scale: float = 1.0
    """multiply rewards by this before learning"""


@dataclass
class A2CConfig:
    """Advantage actor-critic (section ``a2c``): one gradient step per roll-out."""

    num_steps: int = 5
    """roll-out length per env and iteration (n of the n-step returns)"""
    learning_rate: float = 7e-4
    """learning rate"""
    optimizer: Literal["rmsprop", "adam"] = "rmsprop"
    """optimizer (rmsprop: alpha 0.99, eps 1e-5 as in SB3/OpenAI baselines)"""
    anneal_lr: bool = False
    """decay the learning rate linearly to 0 over the run"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 1.0
    """GAE lambda; 1.0 gives plain n-step returns"""
    norm_adv: bool = False
    """normalize advantages over the roll-out"""
    ent_coef: float = 0.0
    """entropy bonus coefficient"""
    vf_coef: float = 0.5
    """value loss coefficient"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the actor and of the critic"""
    activation: Literal["tanh", "relu", "elu"] = "tanh"
    """hidden activation"""
    init_log_std: float = 0.0
    """initial log standard deviation of Box actions"""
    normalize_obs: bool = False
    """normalize observations by running mean and variance"""
    reward_scale: float = 1.0
    """multiply rewards by this before learning"""


@dataclass
class DDPGConfig:
    """Deep deterministic policy gradient (section ``ddpg``); Box actions only."""

    buffer_size: int = 1_000_000
    """replay capacity in transitions (preallocated on the device)"""
    batch_size: int = 256
    """transitions per gradient step"""
    actor_learning_rate: float = 1e-3
    """Adam learning rate of the actor"""
    critic_learning_rate: float = 1e-3
    """Adam learning rate of the critic"""
    gamma: float = 0.99
    """discount factor"""
    tau: float = 0.005
    """soft update rate of the target networks"""
    learning_starts: int = 10_000
    """env steps of uniform random actions before learning starts (warm-up)"""
    train_frequency: int = 1
    """vector steps between rounds of gradient steps"""
    gradient_steps: int = 1
    """gradient steps per round"""
    policy_delay: int = 1
    """critic steps per actor and target update (1: DDPG; 2: TD3-style delay)"""
    noise: Literal["gaussian", "ou"] = "gaussian"
    """exploration noise: gaussian or ou (Ornstein-Uhlenbeck, per env)"""
    noise_std: float = 0.1
    """noise scale, as a fraction of the half-width of the action range"""
    ou_theta: float = 0.15
    """mean reversion rate of the OU noise"""
    max_grad_norm: float | None = None
    """global gradient-norm clip (null: none)"""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layer widths of the actor and of the critic"""
    activation: Literal["tanh", "relu", "elu"] = "relu"
    """hidden activation"""
    normalize_obs: bool = False
    """normalize observations by running mean and variance"""
    reward_scale: float = 1.0
    """multiply rewards by this before learning"""
    save_replay_buffer: bool = True
    """store the replay buffer in checkpoints (needed for an exact resume)"""


ALGO_CONFIGS: dict[str, type] = {"ppo": PPOConfig, "a2c": A2CConfig, "ddpg": DDPGConfig}
SECTIONS: dict[str, type] = {"trainer": TrainerConfig, **ALGO_CONFIGS}


@dataclass
class PolicySpec:
    """One policy of a multi-agent run: which agent slots it controls and its overrides."""

    agents: list[str | int]
    """roles (e.g. "tagger", "runner") or agent ids within a game"""
    overrides: dict[str, Any] = field(default_factory=dict)
    """fields of the algorithm's config that differ for this policy"""


@dataclass
class Config:
    """A whole run: sections ``trainer``, ``ppo``, ``a2c``, ``ddpg`` and ``policies``."""

    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    a2c: A2CConfig = field(default_factory=A2CConfig)
    ddpg: DDPGConfig = field(default_factory=DDPGConfig)
    policies: dict[str, PolicySpec] = field(default_factory=dict)
    """multi-agent: policy name -> PolicySpec; empty: one policy for every slot"""

    @property
    def algo_config(self) -> PPOConfig | A2CConfig | DDPGConfig:
        """The section of ``trainer.algo``."""
        return getattr(self, self.trainer.algo)

    def policy_config(self, name: str) -> PPOConfig | A2CConfig | DDPGConfig:
        """The algorithm config of policy ``name``, with its overrides applied."""
        spec = self.policies.get(name)
        if spec is None or not spec.overrides:
            return self.algo_config
        return dataclasses.replace(self.algo_config, **spec.overrides)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (YAML- and checkpoint-safe: lists, not tuples)."""
        out: dict[str, Any] = {name: _plain(dataclasses.asdict(getattr(self, name)))
                               for name in SECTIONS}
        out["policies"] = {
            name: {"agents": list(spec.agents),
                   **({self.trainer.algo: _plain(spec.overrides)} if spec.overrides else {})}
            for name, spec in self.policies.items()
        }
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# -- help text from field docstrings (CleanRL style) --


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


# -- validation --


def _coerce(value: Any, hint: Any, where: str) -> Any:
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
                return _coerce(value, arg, where)
            except (TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise TypeError(f"{where} must be {type_name(hint)}, got {value!r}")
    if origin is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            raise ValueError(f"{where} must be one of {list(choices)}, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where} must be a list, got {value!r}")
        item = typing.get_args(hint)[0]
        return tuple(_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where} must be a list, got {value!r}")
        item = typing.get_args(hint)[0]
        return [_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
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


def _number(text: str, where: str, hint: type) -> float:
    # PyYAML reads "3e-4" (no dot) as a string; accept any Python float literal.
    try:
        return float(text)
    except ValueError:
        raise TypeError(f"{where} must be {'an int' if hint is int else 'a number'}, "
                        f"got {text!r}") from None


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
    kwargs = {k: _coerce(v, hints[k], f"{section}.{k}") for k, v in values.items()}
    return cls(**kwargs)


def config_from_dict(raw: dict[str, Any]) -> Config:
    """Validate a nested dict (YAML layout) into a :class:`Config`."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise TypeError(f"a config must be a mapping of sections, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {*SECTIONS, "policies"})
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
        agents = _coerce(agents, list[str | int], f"{where}.agents")
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
    """Checks across fields, and that the env id exists (no env is built)."""
    from gpu_vecenv.registry import get_entry

    t = config.trainer
    get_entry(t.env)
    for name in ("num_envs", "total_steps"):
        if getattr(t, name) < 1:
            raise ValueError(f"trainer.{name} must be >= 1, got {getattr(t, name)}")
    if t.log_interval < 1:
        raise ValueError(f"trainer.log_interval must be >= 1, got {t.log_interval}")
    if t.checkpoint_interval < 0 or t.eval_episodes < 0:
        raise ValueError("trainer.checkpoint_interval and trainer.eval_episodes must be >= 0")
    names = list(config.policies) or ["default"]
    for name in names:
        c = config.policy_config(name)
        where = t.algo if name == "default" else f"policies.{name}.{t.algo}"
        if any(h < 1 for h in c.hidden_sizes):
            raise ValueError(f"{where}.hidden_sizes must be positive, got {c.hidden_sizes}")
        if not 0.0 <= c.gamma <= 1.0:
            raise ValueError(f"{where}.gamma must be in [0, 1], got {c.gamma}")
        if isinstance(c, (PPOConfig, A2CConfig)):
            if c.num_steps < 1:
                raise ValueError(f"{where}.num_steps must be >= 1")
        if isinstance(c, PPOConfig):
            if c.num_minibatches < 1 or c.update_epochs < 1:
                raise ValueError(f"{where}.num_minibatches and update_epochs must be >= 1")
        if isinstance(c, DDPGConfig):
            if c.batch_size < 1 or c.buffer_size < c.batch_size:
                raise ValueError(f"{where}: need 1 <= batch_size <= buffer_size")
            if c.train_frequency < 1 or c.gradient_steps < 0 or c.policy_delay < 1:
                raise ValueError(f"{where}: train_frequency, policy_delay >= 1, "
                                 "gradient_steps >= 0")
            if not 0.0 < c.tau <= 1.0:
                raise ValueError(f"{where}.tau must be in (0, 1], got {c.tau}")


# -- YAML and overrides --


def _yaml():
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - pyyaml is in the train extra
        raise RuntimeError("YAML configs need PyYAML: pip install 'gpu-vecenv[train]'") from exc
    return yaml


def load_yaml(path: str | Path) -> dict[str, Any]:
    """The raw nested dict of a YAML file (a clear error if it is not a mapping)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    yaml = _yaml()
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a mapping of sections, got {type(raw).__name__}")
    return raw


def parse_value(text: str) -> Any:
    """A command-line value in YAML syntax (``3``, ``0.1``, ``true``, ``[64, 64]``)."""
    try:
        return _yaml().safe_load(text)
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
    """Build a validated :class:`Config`: defaults, then the YAML file at ``path``, then
    ``overrides`` (``"section.key=value"``), then ``trainer`` keyword values."""
    raw = load_yaml(path) if path is not None else {}
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
