"""``check_env``: conformance checks for a vector env or an env definition (yours or ours).

Run it on a new env before anything else::

    from gpu_vecenv.checks import check_env
    report = check_env(MY_DEFINITION)        # raises EnvCheckError on the first failure
    print(report)                            # what ran, and what was skipped and why

What it checks:

- **api**: spaces (Box observations; Discrete, MultiDiscrete or Box actions; batched
  spaces with ``num_envs`` rows); ``reset``/``step`` return torch tensors of the documented
  shapes and dtypes on the env's device, finite, observations inside the observation space;
- **reference** (definitions only): the pure functions return every state field with its
  shape and dtype, ``step`` does not modify its input state in place, ``reset`` is a pure
  function of its uniforms;
- **autoreset** (definitions only; all three modes): ``SAME_STEP`` puts ``final_obs`` and its
  mask in ``info``; ``NEXT_STEP`` spends the step after a ``done`` resetting (reward 0, no
  ``done``); ``DISABLED`` resets only the masked envs; time limits truncate;
- **state**: ``set_state(get_state())`` then the same actions reproduces a step exactly;
- **seeding**: the same seed gives identical roll-outs, different seeds different starts;
- **kernel** (definitions with a CUDA backend available): the kernels against the torch
  reference, over a shared-seed roll-out and by state injection (the states the reference
  visits are written into both backends, stepped once, compared); see
  :func:`compare_backends`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.definition import EnvDefinition

ALL_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED)


class EnvCheckError(AssertionError):
    """A conformance check failed; the message names the check and what was wrong."""


@dataclass
class CheckReport:
    """What :func:`check_env` ran: the checks that passed and those skipped (with why)."""

    passed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"passed: {', '.join(self.passed)}"]
        lines += [f"skipped {name}: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines)


def _require(condition: bool, check: str, message: str) -> None:
    if not condition:
        raise EnvCheckError(f"[{check}] {message}")


def random_actions(space: gym.Space, n: int, device: torch.device,
                   generator: torch.Generator) -> torch.Tensor:
    """``n`` valid actions of ``space`` in the canonical form, drawn on the CPU from
    ``generator`` (reproducible on every device) and moved to ``device``."""
    if isinstance(space, gym.spaces.Discrete):
        a = torch.randint(int(space.n), (n,), generator=generator) + int(space.start)
    elif isinstance(space, gym.spaces.MultiDiscrete):
        nvec = torch.as_tensor(space.nvec, dtype=torch.float64)
        u = torch.rand((n, *space.shape), generator=generator, dtype=torch.float64)
        a = (u * nvec).long() + torch.as_tensor(space.start, dtype=torch.int64)
    elif isinstance(space, gym.spaces.Box):
        low = torch.as_tensor(space.low, dtype=torch.float32)
        high = torch.as_tensor(space.high, dtype=torch.float32)
        low = torch.where(torch.isfinite(low), low, torch.full_like(low, -1.0))
        high = torch.where(torch.isfinite(high), high, torch.full_like(high, 1.0))
        u = torch.rand((n, *space.shape), generator=generator)
        a = low + u * (high - low)
    else:
        raise TypeError(f"unsupported action space {space}")
    return a.to(device)


def check_env(
    env_or_definition: gym.vector.VectorEnv | EnvDefinition | str,
    *,
    num_envs: int = 16,
    steps: int = 64,
    device: str | torch.device = "cpu",
    seed: int = 0,
    check_kernel: bool | None = None,
    atol: float = 1e-5,
    seed_sensitive: bool = True,
    **params: Any,
) -> CheckReport:
    """Run the conformance checks above; raise :class:`EnvCheckError` on the first failure.

    Args:
        env_or_definition: an :class:`EnvDefinition` (every check, on envs built here), a
            registered single-agent id (its definition), or an already made vector env
            (api, state and seeding checks on that env; it is reset).
        num_envs: envs in the batches built here.
        steps: steps of each roll-out.
        device: device of the envs built here (the reference runs there).
        seed: seed of the roll-outs; ``seed + 1`` is the "different" seed.
        check_kernel: compare the CUDA kernels with the reference: ``None`` (default) when a
            CUDA backend can run, ``True`` always (fails if it cannot), ``False`` never.
        atol: float tolerance of the kernel comparison.
        seed_sensitive: require that different seeds (and different envs of one batch)
            start differently; ``False`` for envs whose start is deterministic by design.
        **params: params of the definition (``num_envs`` envs built here use them).

    Returns:
        A :class:`CheckReport`.
    """
    report = CheckReport()
    if isinstance(env_or_definition, str):
        from gpu_vecenv.env_ids import get_entry, load_definition

        definition = load_definition(env_or_definition)
        if not isinstance(definition, EnvDefinition):
            env = _make_id(env_or_definition, num_envs, device, params)
            return _check_made_env(env, steps, seed, seed_sensitive, report)
        fields = {f.name for f in dataclasses.fields(definition.params_type)}
        registered = get_entry(env_or_definition).kwargs
        params = {k: v for k, v in registered.items() if k in fields} | params
        env_or_definition = definition
    if not isinstance(env_or_definition, EnvDefinition):
        if params:
            raise TypeError("params apply only to a definition or an id")
        return _check_made_env(env_or_definition, steps, seed, seed_sensitive, report)

    definition = env_or_definition
    device = torch.device(device)

    def make(mode: AutoresetMode = AutoresetMode.NEXT_STEP, **kwargs: Any):
        from gpu_vecenv.vector_env import GpuVectorEnv

        kwargs.setdefault("backend", "torch")
        return GpuVectorEnv(definition, num_envs, device=device, autoreset_mode=mode,
                            strict=True, **params, **kwargs)

    _check_reference(definition, definition.make_params(**params), num_envs, device, seed)
    report.passed.append("reference")
    for mode in ALL_MODES:
        env = make(mode)
        _check_api(env, steps, seed)
        env.close()
    report.passed.append("api")
    _check_autoreset(make, steps, seed)
    report.passed.append("autoreset")
    env = make()
    _check_state(env, seed)
    _check_seeding(env, steps, seed, seed_sensitive)
    env.close()
    report.passed += ["state", "seeding"]
    _check_kernel_if_possible(definition, params, num_envs, steps, seed, atol, check_kernel,
                              report)
    return report


def _make_id(env_id: str, num_envs: int, device: Any, params: dict[str, Any]):
    from gpu_vecenv import make_vec

    return make_vec(env_id, num_envs, device=device, **params)


def _check_made_env(env: Any, steps: int, seed: int, seed_sensitive: bool,
                    report: CheckReport) -> CheckReport:
    _check_api(env, steps, seed)
    report.passed.append("api")
    if hasattr(env, "get_state") and hasattr(env, "set_state"):
        _check_state(env, seed)
        report.passed.append("state")
    else:
        report.skipped["state"] = "the env has no get_state/set_state"
    _check_seeding(env, steps, seed, seed_sensitive)
    report.passed.append("seeding")
    for name, why in (("reference", "a made env, not a definition"),
                      ("autoreset", "a made env: pass the definition to check every mode"),
                      ("kernel", "a made env: pass the definition to compare backends")):
        report.skipped[name] = why
    return report


# -- reference functions --


def _check_reference(definition: EnvDefinition, p: Any, n: int, device: torch.device,
                     seed: int) -> None:
    check = "reference"
    generator = torch.Generator().manual_seed(seed)
    draws = definition.num_reset_draws(p)
    _require(isinstance(draws, int) and draws >= 0, check,
             f"num_reset_draws must return an int >= 0, got {draws!r}")
    u = torch.rand((n, draws), generator=generator).to(device)
    state = definition.reset(p, u)
    _check_state_dict(definition, state, n, device, "reset")
    again = definition.reset(p, u.clone())
    for f in definition.state_fields:
        _require(torch.equal(state[f.name], again[f.name]), check,
                 f"reset is not a pure function of its uniforms: field {f.name!r} differs")
    obs = definition.observe(p, state)
    obs_shape = definition.observation_space(p).shape
    _require(isinstance(obs, torch.Tensor) and tuple(obs.shape) == (n, *obs_shape)
             and obs.dtype == torch.float32, check,
             f"observe must return a ({n}, *{obs_shape}) float32 tensor, got "
             f"{_describe(obs)}")
    before = {k: v.clone() for k, v in state.items()}
    action = random_actions(definition.action_space(p), n, device, generator)
    result = definition.step(p, state, action)
    _require(isinstance(result, tuple) and len(result) == 3, check,
             "step must return (state, reward, terminated)")
    new_state, reward, terminated = result
    _check_state_dict(definition, new_state, n, device, "step")
    _require(isinstance(reward, torch.Tensor) and tuple(reward.shape) == (n,)
             and reward.dtype == torch.float32, check,
             f"step's reward must be a ({n},) float32 tensor, got {_describe(reward)}")
    _require(isinstance(terminated, torch.Tensor) and tuple(terminated.shape) == (n,)
             and terminated.dtype == torch.bool, check,
             f"step's terminated must be a ({n},) bool tensor, got {_describe(terminated)}")
    for name, value in before.items():
        _require(torch.equal(state[name], value), check,
                 f"step modified its input state in place (field {name!r}); it must return "
                 "new tensors (the runtime keeps the old state of envs it does not step)")


def _check_state_dict(definition: EnvDefinition, state: Any, n: int, device: torch.device,
                      where: str) -> None:
    _require(isinstance(state, dict), "reference", f"{where} must return a dict of tensors")
    for f in definition.state_fields:
        _require(f.name in state, "reference", f"{where} did not return state field {f.name!r}")
        t = state[f.name]
        _require(isinstance(t, torch.Tensor) and tuple(t.shape) == (n,)
                 and t.device.type == device.type, "reference",
                 f"{where}: state field {f.name!r} must be a ({n},) tensor on {device}, got "
                 f"{_describe(t)}")


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)} {value.dtype} on {value.device}"
    return type(value).__name__


# -- API of a made env --


def _obs_bounds(space: gym.spaces.Box, device: torch.device):
    low = torch.as_tensor(space.low, dtype=torch.float32, device=device)
    high = torch.as_tensor(space.high, dtype=torch.float32, device=device)
    return low, high


def _check_obs(env: Any, obs: Any, where: str) -> None:
    check = "api"
    space = env.single_observation_space
    shape = (env.num_envs, *space.shape)
    _require(isinstance(obs, torch.Tensor), check,
             f"{where}: obs must be a torch tensor, got {type(obs).__name__}")
    _require(tuple(obs.shape) == shape, check,
             f"{where}: obs has shape {tuple(obs.shape)}, expected {shape}")
    _require(obs.dtype == torch.float32, check, f"{where}: obs must be float32, got {obs.dtype}")
    _require(obs.device == torch.device(env.device), check,
             f"{where}: obs is on {obs.device}, the env on {env.device}")
    _require(bool(torch.isfinite(obs).all()), check, f"{where}: obs holds NaN or inf")
    low, high = _obs_bounds(space, obs.device)
    inside = (obs >= low) & (obs <= high)
    if not bool(inside.all()):
        bad = torch.nonzero(~inside)[0].tolist()
        raise EnvCheckError(f"[{check}] {where}: obs[{bad[0]}] = {obs[bad[0]].tolist()} is "
                            f"outside the observation space {space}")


def _check_api(env: Any, steps: int, seed: int) -> None:
    check = "api"
    n = env.num_envs
    _require(isinstance(env.single_observation_space, gym.spaces.Box), check,
             f"single_observation_space must be a Box, got {env.single_observation_space}")
    action_space = env.single_action_space
    _require(isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                                       gym.spaces.Box)), check,
             f"single_action_space must be Discrete, MultiDiscrete or Box, got {action_space}")
    for name in ("observation_space", "action_space"):
        batched = getattr(env, name)
        _require(batched.shape is not None and batched.shape[:1] == (n,), check,
                 f"{name} must be batched with {n} rows, got {batched}")
    mode = env.metadata.get("autoreset_mode")
    _require(isinstance(mode, AutoresetMode), check,
             f"metadata['autoreset_mode'] must be an AutoresetMode, got {mode!r}")
    obs, info = env.reset(seed=seed)
    _require(isinstance(info, dict), check, "reset must return (obs, info dict)")
    _check_obs(env, obs, "reset")
    generator = torch.Generator().manual_seed(seed)
    for t in range(steps):
        action = random_actions(action_space, n, torch.device(env.device), generator)
        result = env.step(action)
        _require(isinstance(result, tuple) and len(result) == 5, check,
                 "step must return (obs, reward, terminated, truncated, info)")
        obs, reward, terminated, truncated, info = result
        where = f"step {t}"
        _check_obs(env, obs, where)
        for name, value, dtype in (("reward", reward, torch.float32),
                                   ("terminated", terminated, torch.bool),
                                   ("truncated", truncated, torch.bool)):
            _require(isinstance(value, torch.Tensor) and tuple(value.shape) == (n,)
                     and value.dtype == dtype, check,
                     f"{where}: {name} must be a ({n},) {dtype} tensor, got {_describe(value)}")
        _require(bool(torch.isfinite(reward).all()), check, f"{where}: reward holds NaN or inf")
        _require(isinstance(info, dict), check, f"{where}: info must be a dict")
        if mode == AutoresetMode.SAME_STEP:
            for key in ("final_obs", "_final_obs"):
                _require(key in info, check, f"{where}: SAME_STEP info lacks {key!r}")
            done = terminated | truncated
            _require(torch.equal(info["_final_obs"].to(done.device), done), check,
                     f"{where}: info['_final_obs'] must equal terminated | truncated")
        if mode == AutoresetMode.DISABLED:
            done = terminated | truncated
            if bool(done.any()):  # DISABLED envs run on past their end until reset
                env.reset(options={"reset_mask": done})


# -- autoreset contract (definitions) --


def _first_dones(env: Any, steps: int, generator: torch.Generator):
    """Step until some env is done; returns (actions fn, step outputs) or None."""
    for _ in range(steps):
        action = random_actions(env.single_action_space, env.num_envs, env.device, generator)
        out = env.step(action)
        if bool((out[2] | out[3]).any()):
            return out
    return None


def _check_autoreset(make: Callable[..., Any], steps: int, seed: int) -> None:
    check = "autoreset"
    limit = 3
    for mode in ALL_MODES:
        env = make(mode, max_episode_steps=limit)
        env.reset(seed=seed)
        generator = torch.Generator().manual_seed(seed)
        ended = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        for _ in range(limit):
            action = random_actions(env.single_action_space, env.num_envs, env.device,
                                    generator)
            _, _, terminated, truncated, _ = env.step(action)
            ended |= terminated | truncated
        _require(bool(ended.all()), check,
                 f"{mode.name}: with max_episode_steps={limit}, every env must be done "
                 f"within {limit} steps")
        env.close()

    env = make(AutoresetMode.NEXT_STEP)
    env.reset(seed=seed)
    generator = torch.Generator().manual_seed(seed)
    out = _first_dones(env, 10 * steps, generator)
    if out is not None:
        done = out[2] | out[3]
        action = random_actions(env.single_action_space, env.num_envs, env.device, generator)
        obs, reward, terminated, truncated, _ = env.step(action)
        _require(bool((reward[done] == 0).all()) and not bool(terminated[done].any())
                 and not bool(truncated[done].any()), check,
                 "NEXT_STEP: the step after a done must be a reset (reward 0, no done)")
    env.close()

    env = make(AutoresetMode.DISABLED)
    first, _ = env.reset(seed=seed)
    generator = torch.Generator().manual_seed(seed)
    action = random_actions(env.single_action_space, env.num_envs, env.device, generator)
    stepped, *_ = env.step(action)
    mask = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
    mask[::2] = True
    obs, _ = env.reset(options={"reset_mask": mask})
    _require(torch.equal(obs[~mask], stepped[~mask]), check,
             "DISABLED: reset with a mask changed envs outside the mask")
    _require(not torch.equal(obs[mask], stepped[mask]), check,
             "DISABLED: reset with a mask did not reset the masked envs")
    env.close()


# -- state access and seeding --


def _check_state(env: Any, seed: int) -> None:
    check = "state"
    env.reset(seed=seed)
    generator = torch.Generator().manual_seed(seed)
    warmup = random_actions(env.single_action_space, env.num_envs, env.device, generator)
    env.step(warmup)
    saved = env.get_state()
    action = random_actions(env.single_action_space, env.num_envs, env.device, generator)
    first = [t.clone() for t in env.step(action)[:4]]
    env.set_state(saved)
    second = env.step(action)[:4]
    for name, a, b in zip(("obs", "reward", "terminated", "truncated"), first, second,
                          strict=True):
        _require(torch.equal(a, b), check,
                 f"set_state(get_state()) then the same actions gave a different {name}")


def _rollout(env: Any, seed: int, steps: int) -> list[torch.Tensor]:
    obs, _ = env.reset(seed=seed)
    generator = torch.Generator().manual_seed(seed)
    out = [obs.clone()]
    for _ in range(steps):
        action = random_actions(env.single_action_space, env.num_envs, env.device, generator)
        result = env.step(action)
        out += [t.clone() for t in result[:4]]
    return out


def _check_seeding(env: Any, steps: int, seed: int, seed_sensitive: bool) -> None:
    check = "seeding"
    a = _rollout(env, seed, steps)
    b = _rollout(env, seed, steps)
    _require(all(torch.equal(x, y) for x, y in zip(a, b, strict=True)), check,
             f"two roll-outs from reset(seed={seed}) with the same actions differ")
    if not seed_sensitive:
        return
    c, _ = env.reset(seed=seed + 1)
    _require(not torch.equal(a[0], c), check,
             f"reset(seed={seed}) and reset(seed={seed + 1}) gave the same observations "
             "(pass seed_sensitive=False if the start is deterministic by design)")
    if env.num_envs > 1:
        _require(not bool((a[0] == a[0][:1]).all()), check,
                 "every env started from the same observation (the env index must be part "
                 "of the random stream)")


# -- kernels against the reference --


def _check_kernel_if_possible(definition: EnvDefinition, params: dict[str, Any], n: int,
                              steps: int, seed: int, atol: float, wanted: bool | None,
                              report: CheckReport) -> None:
    from gpu_vecenv.backends import cuda_backend_problem

    if wanted is False:
        report.skipped["kernel"] = "check_kernel=False"
        return
    cuda = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() \
        else torch.device("cuda")
    problem = cuda_backend_problem(cuda)
    if problem is not None:
        if wanted:
            raise EnvCheckError(f"[kernel] check_kernel=True but the CUDA backend cannot "
                                f"run: {problem}")
        report.skipped["kernel"] = problem
        return
    from gpu_vecenv.vector_env import GpuVectorEnv

    reference, kernel = (
        GpuVectorEnv(definition, n, device=cuda, backend=name, strict=True,
                     autoreset_mode=AutoresetMode.SAME_STEP, **params)
        for name in ("torch", "cuda"))
    compare_backends(reference, kernel, steps=steps, seed=seed, atol=atol)
    reference.close()
    kernel.close()
    report.passed.append("kernel")


def compare_backends(reference: Any, other: Any, *, steps: int = 64, seed: int = 0,
                     atol: float = 1e-5) -> None:
    """Hold ``other`` (e.g. the CUDA kernels) to ``reference`` (the torch reference): two
    ``SAME_STEP`` envs of one definition, same size and device. Compares the reset, a
    shared-seed roll-out (re-synchronized from the reference's state after every step, so
    float drift cannot compound) and, by state injection, one step from every state the
    reference visited, with fresh actions. Floats within ``atol``, the rest exactly.

    Raises:
        EnvCheckError: ``[kernel] ...`` naming the step and the output that differs.
    """
    names = ("obs", "reward", "terminated", "truncated", "final_obs")
    device = torch.device(reference.device)
    n = reference.num_envs

    def compare(a: list[torch.Tensor], b: list[torch.Tensor], where: str) -> None:
        for name, x, y in zip(names, a, b, strict=False):
            ok = torch.allclose(x, y, atol=atol, rtol=0) if x.dtype.is_floating_point \
                else torch.equal(x, y)
            _require(ok, "kernel", f"{where}: {name} of the kernel differs from the reference "
                     f"(max diff {(x.double() - y.double()).abs().max().item():.3g})")

    compare([reference.reset(seed=seed)[0]], [other.reset(seed=seed)[0]], "reset")
    generator = torch.Generator().manual_seed(seed)
    visited = []
    for t in range(steps):
        visited.append(reference.get_state())
        action = random_actions(reference.single_action_space, n, device, generator)
        compare(_outputs(reference.step(action)), _outputs(other.step(action)),
                f"roll-out step {t}")
        other.set_state(reference.get_state())
    for t, state in enumerate(visited):
        action = random_actions(reference.single_action_space, n, device, generator)
        reference.set_state(state)
        other.set_state(state)
        compare(_outputs(reference.step(action)), _outputs(other.step(action)),
                f"state injection of step {t}'s states")


def _outputs(result: tuple) -> list[torch.Tensor]:
    obs, reward, terminated, truncated, info = result
    return [obs, reward, terminated, truncated, info["final_obs"]]
