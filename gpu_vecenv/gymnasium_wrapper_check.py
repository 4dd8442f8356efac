"""A clear error or warning when one of Gymnasium's numpy vector wrappers wraps our env.

Gymnasium's vector wrappers (``gymnasium.wrappers.vector``) compute with numpy; our envs
return torch tensors. On them most of those wrappers fail deep inside numpy or torch at
the first ``reset()`` or ``step()``, and some silently hand back numpy arrays
(docs/wrappers.md has the table; tests/wrappers/test_gymnasium_wrappers.py tries each).
Nothing in Gymnasium lets an env see what wraps it, so :func:`install` wraps the
constructor of each wrapper in :data:`VERDICTS` with a check that acts only when the env
it wraps is one of ours, directly or under our own wrappers (any other wrapper in
between may turn tensors into numpy arrays, so then it says nothing):

- an error (``TypeError``, at construction) where the wrapper would fail anyway, later
  and deep inside numpy or torch;
- a warning (:class:`NumpyWrapperWarning`) where it runs but hands back numpy arrays,
  works only for numpy actions, or loops over the envs in Python.

Both name what to use instead: the torch-native wrapper of ``gpu_vecenv.wrappers`` where
there is one. For any other env Gymnasium's wrappers behave exactly as before.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Any

_CHECKED = "_gpu_vecenv_checked"


class NumpyWrapperWarning(UserWarning):
    """One of Gymnasium's numpy vector wrappers wraps one of our torch envs and will hand
    back numpy arrays, need numpy actions, or loop over the envs in Python."""


@dataclass(frozen=True)
class Verdict:
    """What happens when a Gymnasium vector wrapper wraps one of our envs, and what we do."""

    on_cpu: str
    """``"error"``, ``"warn"`` or ``"ok"`` for an env on the CPU."""
    on_device: str
    """The same for an env on any other device (CUDA)."""
    problem: str
    """What goes wrong (a clause after "it")."""
    instead: str
    """What to use instead."""


def _ours(name: str, note: str = "same arguments") -> str:
    return f"gpu_vecenv.wrappers.{name} ({note}, torch tensors on the env's device)"


VERDICTS: dict[str, Verdict] = {
    "RecordEpisodeStatistics": Verdict(
        "error", "error",
        "keeps its statistics in numpy arrays and fails at the first step() on torch tensors",
        _ours("RecordEpisodeStatistics", "same arguments and info layout")),
    "NormalizeObservation": Verdict(
        "error", "error", "computes with numpy and fails at reset() on torch tensors",
        _ours("NormalizeObservation", "same arguments, plus clip; works in SAME_STEP mode")),
    "NormalizeReward": Verdict(
        "error", "error", "computes with numpy and fails at the first step() on torch tensors",
        _ours("NormalizeReward", "same arguments, plus clip")),
    "RecordVideo": Verdict(
        "error", "error",
        "needs one frame per env and moviepy, and our envs draw only the envs chosen at "
        "construction",
        _ours("RecordVideo", "GIF or MP4 of one env")),
    "HumanRendering": Verdict(
        "error", "error",
        "needs one frame per env, and our envs draw only the envs chosen at construction",
        "make the env with render_mode='human' (it opens its own window)"),
    "FlattenObservation": Verdict(
        "error", "error", "flattens through numpy and fails at reset() on torch tensors",
        _ours("FlattenObservation", "works in SAME_STEP mode")),
    "RescaleObservation": Verdict(
        "error", "error", "rescales with numpy arrays and fails at reset() on torch tensors",
        _ours("RescaleObservation", "same arguments; works in SAME_STEP mode")),
    "DtypeObservation": Verdict(
        "warn", "error",
        "converts each observation through numpy, so it returns numpy arrays instead of "
        "torch tensors (and fails on GPU tensors)",
        _ours("DtypeObservation", "takes torch or numpy dtypes; works in SAME_STEP mode")),
    "ReshapeObservation": Verdict(
        "warn", "error",
        "reshapes each observation through numpy, so it returns numpy arrays instead of "
        "torch tensors (and fails on GPU tensors)",
        _ours("ReshapeObservation", "same arguments; works in SAME_STEP mode")),
    "VectorizeTransformObservation": Verdict(
        "warn", "error",
        "runs a single-env wrapper env by env through numpy, so it returns numpy arrays or "
        "fails (and fails on GPU tensors)",
        "gpu_vecenv.wrappers.TransformObservation(env, func) with a batched torch func"),
    "VectorizeTransformAction": Verdict(
        "warn", "warn",
        "gathers the actions env by env into a numpy array: it fails on torch actions "
        "(numpy actions work, and are copied to the device every step)",
        "gymnasium.wrappers.vector.TransformAction(env, func, action_space) with a batched "
        "torch func"),
    "VectorizeTransformReward": Verdict(
        "warn", "warn",
        "calls its function once per env in a Python loop (on a GPU, a kernel launch per env "
        "per step)",
        "gymnasium.wrappers.vector.TransformReward(env, func) with a batched torch func"),
    "DictInfoToList": Verdict(
        "warn", "warn",
        "fails as soon as info holds tensors (final_obs in SAME_STEP mode, Tag's active, "
        "gpu_vecenv.wrappers.RecordEpisodeStatistics' episode); it works only while info "
        "stays empty",
        "gpu_vecenv.adapters.sb3.SB3VecEnv for SB3's list of info dicts, or read info as "
        "dicts of tensors"),
    "ClipAction": Verdict(
        "ok", "warn",
        "clips through numpy: it fails on actions that are GPU tensors (numpy actions work, "
        "and are copied to the device every step)",
        "gymnasium.wrappers.vector.TransformAction(env, lambda a: a.clamp(low, high), "
        "env.action_space)"),
    "RescaleAction": Verdict(
        "ok", "warn",
        "rescales with numpy bounds: it fails on actions that are GPU tensors (numpy actions "
        "work, and are copied to the device every step)",
        "gymnasium.wrappers.vector.TransformAction with torch arithmetic"),
    "ClipReward": Verdict(
        "ok", "error", "clips through numpy and fails at the first step() on GPU tensors",
        "gymnasium.wrappers.vector.TransformReward(env, lambda r: r.clamp(min, max))"),
}
"""Gymnasium vector wrapper name -> what it does on our envs and what we say about it."""


def verdict_for(name: str, env: Any) -> str:
    """``"error"``, ``"warn"`` or ``"ok"``: what Gymnasium's wrapper ``name`` gets when it
    wraps ``env`` (one of ours, on its ``device``)."""
    verdict = VERDICTS[name]
    if name == "DictInfoToList" and _info_holds_tensors(env):
        return "error"
    return verdict.on_cpu if env.device.type == "cpu" else verdict.on_device


def _info_holds_tensors(env: Any) -> bool:
    """Whether every step's info holds tensors: SAME_STEP's final_obs, a multi-agent env's
    role/active."""
    from gymnasium.vector import AutoresetMode

    return (env.metadata.get("autoreset_mode") == AutoresetMode.SAME_STEP
            or hasattr(env, "num_games"))


def message(name: str, env: Any) -> str:
    """What we say when Gymnasium's wrapper ``name`` wraps ``env`` (one of ours)."""
    verdict = VERDICTS[name]
    what = getattr(env, "env_id", None) or type(env).__name__
    return (f"gymnasium.wrappers.vector.{name} on {what}, whose observations and rewards "
            f"are torch tensors on {env.device}: it {verdict.problem}. Use instead: "
            f"{verdict.instead}. docs/wrappers.md lists which of Gymnasium's wrappers work.")


def check(name: str, wrapped: Any, torch_env_type: type) -> None:
    """Raise or warn if Gymnasium's wrapper ``name`` is about to wrap one of our envs."""
    env = _our_env_under(wrapped, torch_env_type)
    if env is None:
        return
    action = verdict_for(name, env)
    if action == "error":
        raise TypeError(message(name, env))
    if action == "warn":
        # 3: check <- the checked __init__ <- the line that built the wrapper
        warnings.warn(message(name, env), NumpyWrapperWarning, stacklevel=3)


def _our_env_under(wrapped: Any, torch_env_type: type) -> Any:
    """The env of ours that ``wrapped`` is, or that it wraps under our own wrappers only;
    ``None`` otherwise (another wrapper may change what the arrays are)."""
    layer = wrapped
    while not isinstance(layer, torch_env_type):
        if not type(layer).__module__.startswith("gpu_vecenv."):
            return None
        layer = getattr(layer, "env", None)
        if layer is None:
            return None
    return layer


def install(torch_env_type: type) -> None:
    """Check the constructor of every Gymnasium vector wrapper in :data:`VERDICTS` for
    envs of ``torch_env_type`` (the base class of our envs). Idempotent."""
    from gymnasium.wrappers import vector as gymnasium_vector

    for name in VERDICTS:
        cls = getattr(gymnasium_vector, name, None)
        if cls is None or _CHECKED in cls.__dict__:
            continue
        cls.__init__ = _checked_init(cls, name, cls.__init__, torch_env_type)
        setattr(cls, _CHECKED, True)


def _checked_init(cls: type, name: str, original: Any, torch_env_type: type) -> Any:
    @functools.wraps(original)
    def __init__(self, env, *args, **kwargs):
        # Checked once, as the Gymnasium wrapper that was built: DtypeObservation, not the
        # VectorizeTransformObservation it is built on, nor FilterObservation (not ours
        # to judge: Gymnasium refuses our Box spaces itself) through that base.
        if _gymnasium_class_of(type(self)) is cls:
            check(name, env, torch_env_type)
        original(self, env, *args, **kwargs)

    return __init__


def _gymnasium_class_of(cls: type) -> type | None:
    """The first of Gymnasium's classes in ``cls``'s MRO (``cls`` itself, or the one a
    user's subclass extends)."""
    return next((c for c in cls.__mro__ if c.__module__.startswith("gymnasium.")), None)
