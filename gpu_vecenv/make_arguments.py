"""The arguments of ``make_vec`` in the spellings users bring from other libraries:
Gymnasium's ``vector_kwargs``, and ``num_games`` for a multi-agent env.

What ``num_envs`` means for a multi-agent env: the number of *games*, as SuperSuit's
``concat_vec_envs_v1(env, num_vec_envs=G)`` and PufferLib's ``num_envs`` count copies of
the game, while ``env.num_envs``, Gymnasium's batch size, is the number of vector slots,
``G * agents`` (one per agent). Changing the argument to count slots would silently
resize every existing script and config by a factor of the agent count, so it stays;
``num_games=G`` says the same without the ambiguity, and ``gymnasium.make_vec`` (whose
callers expect ``env.num_envs == num_envs``) warns when ``num_envs`` counts games.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

VECTOR_KWARGS = ("autoreset_mode", "copy")
"""The options of Gymnasium's ``SyncVectorEnv`` / ``AsyncVectorEnv`` that our envs have
too; ``vector_kwargs`` may hold these."""


def merge_vector_kwargs(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with Gymnasium's ``vector_kwargs={"autoreset_mode": ...}`` merged in (the
    same option given both ways must agree)."""
    vector_kwargs = kwargs.pop("vector_kwargs", None)
    if vector_kwargs is None:
        return kwargs
    if not isinstance(vector_kwargs, Mapping):
        raise TypeError(f"{env_id}: vector_kwargs must be a dict, got "
                        f"{type(vector_kwargs).__name__}")
    unknown = sorted(set(vector_kwargs) - set(VECTOR_KWARGS))
    if unknown:
        raise TypeError(
            f"{env_id}: vector_kwargs {unknown} are options of Gymnasium's SyncVectorEnv / "
            f"AsyncVectorEnv, which this env does not use (it is one vector env on the "
            f"device); vector_kwargs may hold {', '.join(VECTOR_KWARGS)}")
    merged = dict(kwargs)
    for key, value in vector_kwargs.items():
        if key in merged and _spelled_out(merged[key]) != _spelled_out(value):
            raise ValueError(f"{env_id}: {key} given twice, {merged[key]!r} and "
                             f"vector_kwargs[{key!r}]={value!r}; pass it once")
        merged[key] = value
    return merged


def _spelled_out(value: Any) -> Any:
    """An autoreset mode as its enum, value or name all compare equal: ``"nextstep"``."""
    text = getattr(value, "value", value)
    return text.replace("_", "").lower() if isinstance(text, str) else value


def count_of_games(env_id: str, num_envs: int, kwargs: dict[str, Any], single_agent: bool
                   ) -> int:
    """What the env is made of: ``num_envs`` envs (single-agent), or games; pops
    ``num_games`` from ``kwargs``. ``num_envs`` left at 1 gives way to ``num_games``."""
    num_games = kwargs.pop("num_games", None)
    if num_games is None:
        return num_envs
    if single_agent:
        raise TypeError(f"{env_id} is a single-agent env: num_games is for multi-agent envs "
                        f"(games of several agents); pass num_envs")
    if num_envs != 1 and num_envs != num_games:
        raise ValueError(f"{env_id}: num_envs={num_envs} and num_games={num_games} disagree "
                         f"(for a multi-agent env num_envs counts games too); pass num_games "
                         f"only")
    return num_games


def warn_if_num_envs_counts_games(env_id: str, num_envs: int, kwargs: dict[str, Any],
                                  env: Any) -> None:
    """Warn that ``gymnasium.make_vec(env_id, num_envs=G)`` made ``env``, a multi-agent env
    of ``G * agents`` slots (``num_envs=1``, Gymnasium's default, and ``num_games=`` say
    nothing)."""
    if num_envs == 1 or "num_games" in kwargs or not hasattr(env, "num_games"):
        return
    agents = env.num_agents
    # 4: here <- the entry point <- gymnasium.make_vec <- the caller's line
    warnings.warn(
        f"{env_id}: num_envs={num_envs} counts games (as SuperSuit's and PufferLib's "
        f"vectorizers do), so env.num_envs is {env.num_envs} vector slots ({num_envs} "
        f"games x {agents} agents, slot = game * {agents} + agent). Pass "
        f"num_games={num_envs} to say so and silence this warning.",
        UserWarning, stacklevel=4)
