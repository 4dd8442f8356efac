"""Evaluation of trained policies: N episodes of the deterministic policy (the mode of
the action distribution), optionally a GIF of the first one.

Each of ``episodes`` envs (games, for a multi-agent env) plays exactly one episode;
the first episode of every slot counts, the rest of the vector keeps stepping until all
have finished.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.gif import check_env_draws, check_gif_writer, save_gif
from gpu_vecenv.train.checkpoint import find_checkpoint, first_line, load_checkpoint
from gpu_vecenv.train.config import Config, DDPGConfig
from gpu_vecenv.train.config_loading import config_from_dict
from gpu_vecenv.train.distributions import ActionSpec
from gpu_vecenv.train.networks import ActorCritic, DeterministicActorCritic
from gpu_vecenv.train.policies import agent_roles, slot_assignment

_EVAL_SEED_OFFSET = 1_000_003  # evaluation envs never replay the training seeds


def build_models(config: Config, env, device: torch.device) -> dict[str, torch.nn.Module]:
    """The network of every policy (untrained), without optimizers or storage."""
    spec = ActionSpec.from_space(env.single_action_space)
    obs_dim = int(env.single_observation_space.shape[0])
    models = {}
    for name in slot_assignment(config, env):
        c = config.policy_config(name)
        if isinstance(c, DDPGConfig):
            model = DeterministicActorCritic(obs_dim, spec, tuple(c.hidden_sizes),
                                             c.activation, c.normalize_obs)
        else:
            model = ActorCritic(obs_dim, spec, tuple(c.hidden_sizes), c.activation,
                                c.init_log_std, c.normalize_obs)
        models[name] = model.to(device)
    return models


def load_models(path: str | Path, device: torch.device
                ) -> tuple[Config, dict[str, torch.nn.Module], int]:
    """The networks of a run directory (its ``checkpoints/latest.pt``) or checkpoint file.

    Returns:
        ``(config, models, global_step)``: the run's :class:`Config`; policy name
        (``"default"`` for a single-agent env; Tag: ``"tagger"``, ``"runner"``) -> its
        network on ``device`` (``ActorCritic`` for PPO and A2C, ``DeterministicActorCritic``
        for DDPG; ``model.deterministic_action(obs)`` maps ``(B, obs_dim)`` observations to
        ``(B, *action_shape)`` actions); and the env steps trained when the checkpoint was
        written. :func:`gpu_vecenv.train.load_policy` wraps them with SB3's ``predict``.
    """
    from gpu_vecenv.train.checkpoint import CheckpointError
    from gpu_vecenv.train.training_env import make_env

    file = find_checkpoint(path)
    payload = load_checkpoint(file, device)
    try:
        config = config_from_dict(payload["config"])
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"checkpoint {file} holds an invalid config: {exc}") from None
    env = make_env(config, device, num_envs=1)
    models = build_models(config, env, device)
    env.close()
    for name, model in models.items():
        try:
            model.load_state_dict(payload["policies"][name]["model"])
        except (KeyError, RuntimeError) as exc:
            raise CheckpointError(f"checkpoint {file}: policy {name!r} does not load: "
                                  f"{first_line(exc, 300)}") from None
    return config, models, int(payload["counters"]["global_step"])


@dataclass
class PlayedEpisodes:
    """What :func:`play_episodes` saw: the first episode of every slot (``n`` slots =
    ``games x agents``; slot ``game * agents + agent``). Tensors on the device."""

    games: int
    agents: int
    names: list[str]
    """the policies, in the order of ``owner``'s ids"""
    owner: torch.Tensor
    """``(agents,)`` int64: the policy (index into ``names``) of each agent of a game"""
    random_names: set[str]
    returns: torch.Tensor
    """``(n,)`` float: the episode's return"""
    lengths: torch.Tensor
    """``(n,)`` float: its steps"""
    terminated: torch.Tensor
    """``(n,)`` bool: it ended by termination (else by truncation)"""
    entropy: dict[str, tuple[float, int]] = field(default_factory=dict)
    """with ``entropy=True``: policy -> (sum of its action distribution's entropy over
    the live steps of its slots, number of those steps), for every played network"""


EVAL_CHUNK_STEPS = 32
"""Steps an evaluation plays between two checks whether every episode has ended; on the
CUDA kernels they are one CUDA-graph replay (:func:`gpu_vecenv.capture_rollout`)."""


@torch.no_grad()
def play_episodes(config: Config, models: dict[str, torch.nn.Module] | list, episodes: int,
                  device: torch.device, *, seed: int | None = None,
                  random_policy: bool | str | list[str] = False, stochastic: bool = False,
                  gif_path: str | Path | None = None, max_steps: int = 100_000,
                  entropy: bool = False, capture: bool = True) -> PlayedEpisodes:
    """Play ``episodes`` episodes (games), one per env, from the evaluation seed
    (``seed``, default the run's, offset so evaluation never replays training seeds);
    the arguments are :func:`evaluate`'s. ``entropy``: also sum each trained policy's
    entropy over the steps where its slots are live. ``capture=False``: no CUDA graph (to
    compare; the results are the same).

    The policies and the env run :data:`EVAL_CHUNK_STEPS` steps at a time through
    :func:`~gpu_vecenv.capture_rollout`: captured as a CUDA graph on the CUDA kernels,
    eager elsewhere and while drawing a GIF (a frame a step). Either way the steps, the
    actions and the sums are the eager loop's, so every backend's evaluation is what it
    was step by step."""
    from gpu_vecenv.captured_rollout import capture_problems, capture_rollout
    from gpu_vecenv.entry_points import make_vec

    if not isinstance(models, dict):
        models = {g.name: g.learner.model for g in models}
    t = config.trainer
    render = gif_path is not None
    if render:
        check_env_draws(t.env)
        check_gif_writer()  # before the episodes, not after them
    env = make_vec(t.env, episodes, device=device, backend=t.backend,
                   autoreset_mode=AutoresetMode.SAME_STEP,
                   **({"render_mode": "rgb_array"} if render else {}), **t.env_kwargs)
    roles = agent_roles(env)
    assignment = slot_assignment(config, env)
    agents = 1 if roles is None else len(roles)
    games = env.num_envs // agents
    owner = torch.zeros(agents, dtype=torch.int64)
    names = list(assignment)
    for k, ids in enumerate(assignment.values()):
        if ids is not None:
            owner[ids] = k
    slot_owner = owner.repeat(games).to(device)
    spec = ActionSpec.from_space(env.single_action_space)
    generator = torch.Generator(device=device).manual_seed(
        (t.seed if seed is None else seed) + _EVAL_SEED_OFFSET)
    obs, _ = env.reset(seed=(t.seed if seed is None else seed) + _EVAL_SEED_OFFSET)
    n = env.num_envs
    if isinstance(random_policy, bool):
        random_names = set(names) if random_policy else set()
    else:
        random_names = {random_policy} if isinstance(random_policy, str) else set(random_policy)
        unknown = sorted(random_names - set(names))
        if unknown:
            raise ValueError(f"random_policy names unknown policies {unknown}; "
                             f"policies: {names}")
    slots = [slot_owner == k for k in range(len(names))]  # each policy's slots, (n,) bool
    where = [m if spec.kind == "discrete" else m.unsqueeze(-1) for m in slots]
    low = high = None
    if spec.kind == "box":  # made here: a host-to-device copy cannot be captured
        low = torch.tensor(spec.low, device=device)
        high = torch.tensor(spec.high, device=device)
    random_action = (_random_action_sampler(spec, n, device, generator, low, high)
                     if random_names else None)

    def act(obs: torch.Tensor) -> torch.Tensor:
        """Every slot's action from its policy: ``(n, *action_shape)``."""
        action = torch.zeros((n, *spec.action_shape), dtype=spec.dtype, device=device)
        for k, name in enumerate(names):
            if name in random_names:
                chosen = random_action()
            elif stochastic and hasattr(models[name], "act"):
                chosen, _ = models[name].act(obs, generator)
            else:
                chosen = models[name].deterministic_action(obs)
                if spec.kind == "box":
                    chosen = torch.clamp(chosen, low, high)
            action = torch.where(where[k], chosen.to(spec.dtype), action)
        return action

    capture = (capture and not render and device.type == "cuda" and env.backend_name == "cuda"
               and not capture_problems(env))
    chunk = 1 if render else min(EVAL_CHUNK_STEPS, max_steps)
    rollout = capture_rollout(env, act, chunk, generators=[generator], warmup_calls=1,
                              capture=capture)
    returns = torch.zeros(n, device=device)
    lengths = torch.zeros(n, device=device)
    finished = torch.zeros(n, dtype=torch.bool, device=device)
    terminated_first = torch.zeros(n, dtype=torch.bool, device=device)
    measured = [k for k, name in enumerate(names)
                if entropy and name not in random_names and hasattr(models[name], "evaluate")]
    entropy_sums = {names[k]: [torch.zeros((), device=device), 0.0] for k in measured}
    frames = []
    played = 0
    while played < max_steps:
        if render and not bool(finished[0]):
            frames.extend(_frames(env))
        trajectory = rollout(obs)
        obs = trajectory.next_obs
        for step in range(min(chunk, max_steps - played)):
            live = ~finished
            for k in measured:  # the entropy does not depend on the action
                _, ent, _ = models[names[k]].evaluate(trajectory.obs[step],
                                                      trajectory.actions[step])
                measured_slots = slots[k] & live
                entropy_sums[names[k]][0] += (ent * measured_slots).sum()
                entropy_sums[names[k]][1] += measured_slots.sum()
            terminated = trajectory.terminated[step]
            returns += trajectory.rewards[step] * live
            lengths += live.float()
            terminated_first |= terminated & live
            finished |= terminated | trajectory.truncated[step]
        played += chunk
        if played % EVAL_CHUNK_STEPS == 0 and bool(finished.all()):
            break
    rollout.check_errors()
    del rollout  # its graph and memory, before the next evaluation captures its own
    env.close()
    if not bool(finished.all()):
        raise RuntimeError(f"evaluation: episodes did not end within {max_steps} steps")
    if render:
        save_gif(frames, gif_path, env.metadata.get("render_fps", 30))
    return PlayedEpisodes(
        games, agents, names, owner, random_names, returns, lengths, terminated_first,
        {name: (float(total), int(count)) for name, (total, count) in entropy_sums.items()
         if int(count) > 0})


def evaluate(config: Config, models: dict[str, torch.nn.Module] | list, episodes: int,
             device: torch.device, *, seed: int | None = None,
             random_policy: bool | str | list[str] = False, stochastic: bool = False,
             gif_path: str | Path | None = None, max_steps: int = 100_000
             ) -> dict[str, Any]:
    """Play ``episodes`` episodes (games) and return their mean returns.

    ``models``: policy name -> network (or the trainer's policy groups).
    ``random_policy``: ``True`` plays uniform random actions for every slot; a policy
    name (or list of names) only for those policies (e.g. trained taggers against
    random runners). ``stochastic``: sample from the policies (PPO, A2C) instead of
    playing their most likely action. Returns
    ``{"episodes", "mean_return", "std_return", "mean_length", "policies": {name:
    {"mean_return_per_agent", "mean_return_per_game"}}}`` (``mean_return`` is per slot
    for single-agent envs: the usual episode return).
    """
    played = play_episodes(config, models, episodes, device, seed=seed,
                           random_policy=random_policy, stochastic=stochastic,
                           gif_path=gif_path, max_steps=max_steps)
    returns, n = played.returns, played.returns.shape[0]
    per_game = returns.reshape(played.games, played.agents)
    result: dict[str, Any] = {
        "env": config.trainer.env, "episodes": played.games,
        "random_policies": sorted(played.random_names), "stochastic": stochastic,
        "mean_return": float(returns.mean()), "std_return": float(returns.std()) if n > 1
        else 0.0, "mean_length": float(played.lengths.mean()), "policies": {}}
    for k, name in enumerate(played.names):
        ids = [i for i in range(played.agents) if int(played.owner[i]) == k]
        result["policies"][name] = {
            "mean_return_per_agent": float(per_game[:, ids].mean()),
            "mean_return_per_game": float(per_game[:, ids].sum(1).mean())}
    if gif_path is not None:
        result["gif"] = str(gif_path)
    return result


def _random_action_sampler(spec: ActionSpec, n: int, device: torch.device,
                           generator: torch.Generator, low: torch.Tensor | None,
                           high: torch.Tensor | None) -> Callable[[], torch.Tensor]:
    """``() -> (n, *action_shape)`` uniform random actions drawn from ``generator``
    (``low``, ``high``: a Box's bounds on the device); a discrete space's sizes go to the
    device once, here (a host-to-device copy cannot be captured)."""
    if spec.kind == "box":
        return lambda: low + (high - low) * torch.rand((n, len(spec.low)), device=device,
                                                       generator=generator)
    nvec = torch.tensor(spec.nvec, device=device)
    start = torch.tensor(spec.start, device=device)

    def sample() -> torch.Tensor:
        u = torch.rand((n, len(spec.nvec)), device=device, generator=generator)
        action = (u * nvec).long() + start
        return action[:, 0] if spec.kind == "discrete" else action

    return sample


def _frames(env) -> list:
    """The first env's frame (an env without a renderer refused ``render_mode`` already)."""
    frames = env.render()
    return [frames[0]] if isinstance(frames, (tuple, list)) else [frames]


def format_evaluation(ev: dict[str, Any]) -> str:
    """An :func:`evaluate` result in words, as ``gpu-vecenv train`` and ``eval`` print it:
    the mean return (per team, for several policies) and episode length."""
    if len(ev["policies"]) == 1:
        return (f"evaluation over {ev['episodes']} episodes: mean return "
                f"{ev['mean_return']:.2f} (std {ev['std_return']:.2f}), mean length "
                f"{ev['mean_length']:.1f}")
    # Several policies (teams): a mean over taggers and runners together means nothing.
    return (f"evaluation over {ev['episodes']} games: mean agent episode length "
            f"{ev['mean_length']:.1f}; mean return per team:"
            + "".join(f"\n  {name}: {p['mean_return_per_agent']:.3f} per agent, "
                      f"{p['mean_return_per_game']:.3f} per game"
                      for name, p in ev["policies"].items()))


def write_evaluation(result: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(result, indent=2) + "\n")
