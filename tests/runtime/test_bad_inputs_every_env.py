"""Every bad input to every shipped env (issue 32): actions, reset masks and seeds,
``set_state``. Each raises the documented error type at once, with a message naming the
argument (or key), and leaves the env bit-identical to a twin that never saw the call,
on the torch backend and on the CUDA kernels (``gpu``).

Also here: what the docs promise for values that are not errors (finite continuous
actions beyond the bounds are clipped, actions that require grad are used detached),
and the deferred mode (``strict=False``), where only the envs that got a bad value stay
unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

from gpu_vecenv import make_vec
from gpu_vecenv.actions import InvalidActionError
from gpu_vecenv.env_ids import SHIPPED_IDS
from tests.runtime.twins import BACKENDS, NUM, assert_refused, assert_twins, make, valid_actions


@dataclass(frozen=True)
class Case:
    """A bad call: ``build(env)`` gives it as a callable, or ``None`` where it does not
    apply to the env (no float state field, a discrete action space, ...)."""

    name: str
    build: Callable[[Any], Callable[[], Any] | None]
    error: type[Exception]
    match: str


def _step(values: Callable[[Any], Any]) -> Callable[[Any], Callable[[], Any]]:
    return lambda env: (lambda: env.step(values(env)))


def _discrete(env) -> bool:
    return env.actions.kind != "box"


def _with_bad_slot(value: float) -> Callable[[Any], Callable[[], Any] | None]:
    """Valid actions except for slot 1, which gets ``value`` (every component); only for
    the spaces where ``value`` is invalid (NaN and inf for a Box, ints out of range for
    the discrete ones)."""

    def build(env):
        if _discrete(env) == isinstance(value, float):
            return None
        action = valid_actions(env, 1).clone()
        action[1] = value
        return lambda: env.step(action)

    return build


def _wrong_dtype(env) -> torch.Tensor:
    return torch.zeros(env.actions.shape, dtype=torch.float32 if _discrete(env) else torch.int64)


def _shape(env) -> tuple[int, ...]:
    return env.actions.shape


ACTION_CASES = [
    Case("meta device", _step(lambda e: torch.zeros(_shape(e), dtype=e.actions.dtype,
                                                    device="meta")),
         ValueError, r"actions is on meta but the env runs on"),
    Case("None", _step(lambda e: None), TypeError, r"actions must be a tensor.*got NoneType"),
    Case("str", _step(lambda e: "left"), TypeError, r"actions must be a tensor.*got str"),
    Case("dict", _step(lambda e: {"tagger_0": 1}), TypeError, r"actions must be .*got dict"),
    Case("ragged list", _step(lambda e: [[0]] * (e.num_envs - 1) + [[0, 0]]), ValueError,
         r"actions is a ragged sequence"),
    Case("object array", _step(lambda e: np.array([None] * e.num_envs, dtype=object)),
         TypeError, r"actions must hold numbers.*index 0: None"),
    Case("int beyond 64 bits", _step(lambda e: [2**70] * e.num_envs), TypeError,
         r"actions must hold numbers.*an int beyond 64 bits"),
    Case("uint64 beyond int64", _step(lambda e: np.full(_shape(e), 2**64 - 1, np.uint64)),
         ValueError, r"actions holds 18446744073709551615"),
    Case("bool dtype", _step(lambda e: torch.zeros(_shape(e), dtype=torch.bool)), TypeError,
         r"actions must be .* got dtype torch.bool"),
    Case("complex dtype", _step(lambda e: torch.zeros(_shape(e), dtype=torch.complex64)),
         TypeError, r"actions must be .* got dtype torch.complex64"),
    Case("wrong dtype", _step(_wrong_dtype), TypeError, r"actions must be .* got dtype"),
    Case("0-d tensor", _step(lambda e: torch.tensor(0, dtype=e.actions.dtype)), ValueError,
         r"actions must be .*shape \(\d+,.*got shape \(\)"),
    Case("one row too many", _step(lambda e: torch.zeros((e.num_envs + 1, *_shape(e)[1:]),
                                                          dtype=e.actions.dtype)),
         ValueError, r"actions must be .* got shape"),
    Case("sparse tensor", _step(lambda e: torch.zeros(_shape(e), dtype=e.actions.dtype)
                                .to_sparse()),
         TypeError, r"actions is a torch.sparse_coo tensor"),
    Case("above the last action", _with_bad_slot(11), ValueError, r"got actions that are not "
         r"in range"),
    Case("negative action", _with_bad_slot(-1), ValueError, r"got actions that are not in range"),
    Case("action 2**40", _with_bad_slot(2**40), ValueError, r"got actions that are not in range"),
    Case("NaN action", _with_bad_slot(float("nan")), ValueError, r"actions that are not finite"),
    Case("inf action", _with_bad_slot(float("inf")), ValueError, r"actions that are not finite"),
    Case("-inf action", _with_bad_slot(-float("inf")), ValueError,
         r"actions that are not finite"),
]


def _reset(options: Callable[[Any], Any] = lambda e: None,
           seed: Any = None) -> Callable[[Any], Callable[[], Any]]:
    return lambda env: (lambda: env.reset(seed=seed, options=options(env)))


def _mask(make_mask: Callable[[int], Any]) -> Callable[[Any], Callable[[], Any]]:
    return _reset(lambda e: {"reset_mask": make_mask(e.num_envs)})


RESET_CASES = [
    Case("mask on meta", _mask(lambda n: torch.ones(n, dtype=torch.bool, device="meta")),
         ValueError, r"options\['reset_mask'\] is on meta"),
    Case("int mask", _mask(lambda n: np.ones(n, dtype=np.int64)), TypeError,
         r"options\['reset_mask'\] must have dtype bool"),
    Case("list mask", _mask(lambda n: [True] * n), TypeError,
         r"options\['reset_mask'\] must be a numpy array or a torch tensor"),
    Case("None mask", _mask(lambda n: None), TypeError, r"options\['reset_mask'\] must be"),
    Case("0-d mask", _mask(lambda n: torch.tensor(True)), ValueError,
         r"options\['reset_mask'\] must have shape"),
    Case("mask too long", _mask(lambda n: np.ones(n + 1, dtype=bool)), ValueError,
         r"options\['reset_mask'\] must have shape"),
    Case("options a list", _reset(lambda e: ["reset_mask"]), TypeError, r"options must be a dict"),
    Case("unknown option", _reset(lambda e: {"low": -0.1}), ValueError,
         r"unknown reset option"),
    Case("seed a str", _reset(seed="3"), TypeError, r"seed must be"),
    Case("seed a float", _reset(seed=1.5), TypeError, r"seed must be"),
    Case("negative seed", _reset(seed=-1), ValueError, r"seed must be in \[0, 2\*\*64\)"),
    Case("seed 2**64", _reset(seed=2**64), ValueError, r"seed must be in \[0, 2\*\*64\)"),
    Case("too few seeds", _reset(seed=[1]), ValueError, r"a list of seeds must have"),
]


def _set(make_state: Callable[[Any], Any]) -> Callable[[Any], Callable[[], Any] | None]:
    def build(env):
        state = make_state(env)
        return None if state is _SKIP else (lambda: env.set_state(state))

    return build


_SKIP = object()


def _float_key(env) -> str | None:
    return next((k for k, v in env.get_state().items() if v.dtype.is_floating_point), None)


def _float_value(fill: Callable[[torch.Tensor], Any]) -> Callable[[Any], Any]:
    """``{float key: fill(its current value)}``, with a valid write of another key first
    (it must not be written either)."""

    def state(env):
        key = _float_key(env)
        if key is None:
            return _SKIP
        current = env.get_state()
        return {"rng_seed": current["rng_seed"] + 1, key: fill(current[key])}

    return state


def _key_value(key: str, value: Callable[[torch.Tensor], Any]) -> Callable[[Any], Any]:
    def state(env):
        current = env.get_state()
        return _SKIP if key not in current else {key: value(current[key])}

    return state


def _full(value: Any, dtype: torch.dtype = torch.int64) -> Callable[[torch.Tensor], Any]:
    return lambda t: torch.full(t.shape, value, dtype=dtype)


SET_STATE_CASES = [
    Case("state None", _set(lambda e: None), TypeError, r"state must be a dict"),
    Case("state a list", _set(lambda e: [("x", 0.0)]), TypeError, r"state must be a dict"),
    Case("state a tensor", _set(lambda e: torch.zeros(3)), TypeError, r"state must be a dict"),
    Case("unknown key", _set(lambda e: {"rng_seed": e.get_state()["rng_seed"], "velocity_z": 0}),
         KeyError, r"unknown state key\(s\) \['velocity_z'\]"),
    Case("int key", _set(lambda e: {1: 0}), KeyError, r"unknown state key\(s\) \[1\]"),
    Case("value None", _set(_float_value(lambda t: None)), TypeError,
         r"state\['\w+'\] must be a tensor.*got NoneType"),
    Case("value a str", _set(_float_value(lambda t: "x")), TypeError,
         r"state\['\w+'\] must be a tensor.*got str"),
    Case("value on meta", _set(_float_value(lambda t: torch.zeros_like(t, device="meta"))),
         ValueError, r"state\['\w+'\] is on meta"),
    Case("ragged value", _set(_float_value(lambda t: [[0.0]] * (len(t) - 1) + [[0.0, 1.0]])),
         ValueError, r"state\['\w+'\] is a ragged sequence"),
    Case("value of the wrong shape", _set(_float_value(lambda t: torch.zeros(len(t) + 1))),
         ValueError, r"state\['\w+'\] has shape"),
    Case("complex value", _set(_float_value(lambda t: t.to(torch.complex64))), TypeError,
         r"state\['\w+'\] must be torch.float32, got complex"),
    Case("NaN value", _set(_float_value(lambda t: torch.full_like(t, float("nan")))), ValueError,
         r"state\['\w+'\] must hold finite torch.float32 values.*holds nan"),
    Case("inf value", _set(_float_value(lambda t: torch.full_like(t, float("inf")))), ValueError,
         r"state\['\w+'\] must hold finite.*holds inf"),
    Case("-inf value", _set(_float_value(lambda t: torch.full_like(t, -float("inf")))),
         ValueError, r"state\['\w+'\] must hold finite.*holds -inf"),
    Case("float64 1e300", _set(_float_value(lambda t: torch.full(t.shape, 1e300,
                                                                 dtype=torch.float64))),
         ValueError, r"state\['\w+'\] must hold finite torch.float32.*holds 1e\+300"),
    Case("float into an int key", _set(_key_value("rng_counter", lambda t: t.double())),
         TypeError, r"state\['rng_counter'\] must be torch.int64, got floating-point"),
    Case("negative rng_counter", _set(_key_value("rng_counter", _full(-1))), ValueError,
         r"state\['rng_counter'\] must hold values in \[0, "),
    Case("elapsed_steps 2**40", _set(_key_value("elapsed_steps", _full(2**40))), ValueError,
         r"state\['elapsed_steps'\] must hold values in \[0, 2147483647\].*1099511627776"),
    Case("elapsed_steps 2**31+5", _set(_key_value("elapsed_steps", _full(2**31 + 5))),
         ValueError, r"state\['elapsed_steps'\] must hold values in \[0, 2147483647\]"),
    Case("negative elapsed_steps", _set(_key_value("elapsed_steps", _full(-1))), ValueError,
         r"state\['elapsed_steps'\] must hold values in \[0, "),
    Case("autoreset_pending 2", _set(_key_value("autoreset_pending", _full(2))), ValueError,
         r"state\['autoreset_pending'\] must hold values in \[0, 1\]"),
    Case("float autoreset_pending",
         _set(_key_value("autoreset_pending", _full(0.5, torch.float32))), TypeError,
         r"state\['autoreset_pending'\] must be torch.bool"),
    Case("game time 2**40", _set(_key_value("t", _full(2**40))), ValueError,
         r"state\['t'\] must hold values in \[0, 2147483647\]"),
    Case("negative game time", _set(_key_value("t", _full(-1))), ValueError,
         r"state\['t'\] must hold values in \[0, "),
    Case("in_game 2", _set(_key_value("in_game", _full(2))), ValueError,
         r"state\['in_game'\] must hold values in \[0, 1\]"),
]

CASES = ACTION_CASES + RESET_CASES + SET_STATE_CASES

_PROBES = {env_id: make_vec(env_id, NUM, device="cpu", backend="torch")
           for env_id in SHIPPED_IDS}
"""One env per id, to see which cases apply (spaces and state keys)."""
for _probe in _PROBES.values():
    _probe.reset(seed=0)

APPLICABLE = [pytest.param(env_id, case, id=f"{env_id}-{case.name}")
              for env_id in SHIPPED_IDS for case in CASES
              if case.build(_PROBES[env_id]) is not None]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("env_id", "case"), APPLICABLE)
def test_bad_input_is_refused_and_changes_nothing(env_id, case, backend):
    env, twin = make(env_id, backend), make(env_id, backend)
    assert_refused(case.build(env), case.error, case.match)
    assert_twins(env, twin)


def test_every_env_and_family_is_covered():
    """Each case applies to some env, and each env gets cases of every family."""
    applied = {(p.values[0], p.values[1].name) for p in APPLICABLE}
    assert {name for _, name in applied} == {case.name for case in CASES}
    for env_id in SHIPPED_IDS:
        for family in (ACTION_CASES, RESET_CASES, SET_STATE_CASES):
            assert any((env_id, case.name) in applied for case in family), env_id


BOX_IDS = [env_id for env_id in SHIPPED_IDS if _PROBES[env_id].actions.kind == "box"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("env_id", BOX_IDS)
@pytest.mark.parametrize("big", [1e300, 3e38, 1e6])
def test_finite_continuous_actions_beyond_the_bounds_are_clipped(env_id, backend, big):
    """As Gymnasium's Pendulum and MountainCarContinuous do (``np.clip`` / ``min(max())``
    in their step): a finite action beyond the Box moves the env as the nearest bound
    does, float64 beyond float32's range included. MountainCarContinuous's penalty is on
    the unclipped action, as Gymnasium's (in float32: ``-inf`` beyond ~1.8e19)."""
    env, twin = make(env_id, backend), make(env_id, backend)
    space = env.single_action_space
    signs = torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64).reshape(NUM, 1)
    action = (signs * big).expand(NUM, *space.shape).clone()
    bound = torch.where(signs > 0, torch.as_tensor(space.high), torch.as_tensor(space.low))
    obs, reward, terminated, truncated, _ = env.step(action.numpy())
    expected = twin.step(bound.to(env.device))
    for got, want in ((obs, expected[0]), (terminated, expected[2]), (truncated, expected[3])):
        assert torch.equal(got, want)
    if env.definition.name == "mountain_car_continuous":
        cost = env.params.action_cost
        raw = action[:, 0].clamp(-3.4028234663852886e38, 3.4028234663852886e38).float()
        want = (expected[1].cpu() + bound[:, 0] * bound[:, 0] * cost) - raw * raw * cost
        torch.testing.assert_close(reward.cpu(), want, rtol=1e-6, atol=1e-6)
    else:
        assert torch.equal(reward, expected[1])
    assert_twins(env, twin)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("env_id", BOX_IDS)
def test_actions_that_require_grad_are_used_detached(env_id, backend):
    env, twin = make(env_id, backend), make(env_id, backend)
    action = valid_actions(env, 2)
    weight = torch.ones((), device=env.device, requires_grad=True)
    for given in (action * weight, torch.nn.Parameter(action.clone())):
        assert given.requires_grad
        for got, expected in zip(env.step(given)[:4], twin.step(action)[:4], strict=True):
            assert torch.equal(got, expected)
    assert_twins(env, twin)


def _bad_value_for_slot(env) -> tuple[int, torch.Tensor]:
    """Actions, valid except for slot ``1`` (NaN for a Box, out of range otherwise)."""
    action = valid_actions(env, 1).clone()
    action[1] = float("nan") if env.actions.kind == "box" else -1
    return 1, action


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("env_id", SHIPPED_IDS)
def test_deferred_mode_leaves_only_the_units_with_bad_values_unchanged(env_id, backend):
    """``strict=False``: the env (or the game) that got a bad value stays as it was, the
    others step as the twin does, and the error is raised (on the CPU at once, on a GPU
    by ``check_errors()`` at the latest)."""
    env, twin = make(env_id, backend, strict=False), make(env_id, backend, strict=False)
    before = env.get_state()
    slot, action = _bad_value_for_slot(env)
    unit = slot // getattr(env, "num_agents", 1)
    with pytest.raises(InvalidActionError, match="left unchanged"):
        env.step(action)
        env.check_errors()
    twin.step(valid_actions(env, 1))
    after, stepped = env.get_state(), twin.get_state()
    others = torch.arange(NUM) != unit
    for key, value in after.items():
        assert torch.equal(value[unit], before[key][unit]), key
        assert torch.equal(value[others], stepped[key][others]), key
    env.check_errors()  # reported once


@pytest.mark.gpu
@pytest.mark.parametrize("env_id", SHIPPED_IDS)
def test_checked_valid_steps_do_not_sync(env_id):
    """The checks of a valid step look at metadata only: canonical actions, actions that
    require grad and float64 actions step on the CUDA kernels without a host sync."""
    env = make(env_id, "cuda", strict=False, copy=False)
    action = valid_actions(env, 1)
    given = [action]
    if env.actions.kind == "box":
        given += [action * torch.ones((), device="cuda", requires_grad=True), action.double()]
    for _ in range(2 * env.ERROR_FLAG_INTERVAL):  # warm-up, flag copies included
        env.step(action)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for a in given:
            env.step(a)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    env.check_errors()


SINGLE_AGENT_IDS = [env_id for env_id in SHIPPED_IDS if not hasattr(_PROBES[env_id], "num_agents")]
ONE_ENV_CASES = {  # gymnasium.make(id): one action of the space, numpy
    "action None": (lambda env: env.step(None), TypeError, r"action must be a tensor"),
    "ragged action": (lambda env: env.step([[0], [0, 1]]), ValueError,
                      r"action is a ragged sequence"),
    "batched action": (lambda env: env.step(np.stack([env.action_space.sample()] * 2)),
                       ValueError, r"action must be .* got shape \(2,"),
    "action on meta": (lambda env: env.step(torch.zeros(
        env.action_space.shape, device="meta",
        dtype=torch.float32 if env.action_space.shape else torch.int64)), ValueError,
        r"action is on meta"),
    "NaN or out-of-range action": (lambda env: env.step(
        np.full(env.action_space.shape, np.nan, np.float32) if env.action_space.shape
        else np.int64(-1)), ValueError, r"not (finite|in range)"),
    "state None": (lambda env: env.unwrapped.set_state(None), TypeError,
                   r"state must be a dict"),
    "state value NaN": (lambda env: env.unwrapped.set_state(
        {"rng_counter": 0, next(iter(env.unwrapped.get_state())): float("nan")}),
        ValueError, r"state\['\w+'\] must hold finite"),
    "elapsed_steps 2**40": (lambda env: env.unwrapped.set_state({"elapsed_steps": 2**40}),
                            ValueError, r"state\['elapsed_steps'\] must hold values in"),
}


@pytest.mark.parametrize("case", list(ONE_ENV_CASES))
@pytest.mark.parametrize("env_id", SINGLE_AGENT_IDS)
def test_one_env_view_refuses_bad_input_and_changes_nothing(env_id, case):
    import gymnasium as gym

    call, error, match = ONE_ENV_CASES[case]
    env, twin = gym.make(env_id), gym.make(env_id)
    for e in (env, twin):
        e.reset(seed=3)
        e.action_space.seed(3)
        e.step(e.action_space.sample())
    assert_refused(lambda: call(env), error, match)
    assert env.unwrapped.get_state() == twin.unwrapped.get_state()
    action = twin.action_space.sample()
    for got, want in zip(env.step(action)[:4], twin.step(action)[:4], strict=True):
        assert np.array_equal(got, want)
