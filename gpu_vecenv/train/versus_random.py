"""Taggers and runners, each trained or random: the 2x2 evaluation of a Tag run.

Whether both teams learned shows only against a baseline: trained runners must be tagged
less often (or later) than random runners by the same trained taggers, and trained
taggers must tag more (or sooner) than random taggers among random runners. So
:func:`versus_random` plays the same games (the same seed, so the same start positions)
under the four pairings of trained or uniformly random taggers with trained or random
runners, and counts per game the runners tagged, their mean time to be tagged and the
runners escaping (still in the game at its time limit). It also measures how far each
trained policy is from uniform: its mean entropy over the steps its agents are in the
game, against the uniform distribution's ``log(prod(nvec))``.

A runner is *tagged* when its episode ends by termination (it leaves the game, or its
game ends because every runner did) and *escapes* when it ends by truncation: the
envs' rules (continuous Tag's ``runner_exits_game_after_tagged``, the gridworld's single
runner whose tag ends the game).

With one runner a game (gridworld Tag) "runners tagged per game" is the share of games
the taggers win, and a tag rate near 1 under random play says little: there the time to
the tag carries the comparison, counted over every game (an escape lasts the whole game,
``mean_runner_steps``), not only over the tagged ones, so taggers that tag less often
cannot look faster. :func:`format_table` prints that layout for one runner.

Where every game starts from the same cells (gridworld Tag's WarpDrive start, continuous
Tag's ``fixed_start_positions``) and the trained policies play their most likely actions,
the trained/trained games are one game played ``episodes`` times (the rules are
deterministic): the result says so (``identical_starts``) and the table warns.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from gpu_vecenv.train.config import Config
from gpu_vecenv.train.evaluation import PlayedEpisodes, play_episodes

TAGGER, RUNNER = "tagger", "runner"
PAIRINGS = (("trained", "trained"), ("trained", "random"), ("random", "trained"),
            ("random", "random"))
"""(taggers, runners) of each pairing, in the order they are played."""


def team_policies(config: Config, roles: list[str] | None, names_of_agents: dict
                  ) -> dict[str, list[str]]:
    """``{"tagger": [policies], "runner": [policies]}`` from the agents' ``roles`` and
    ``names_of_agents`` (policy -> agent ids, :func:`~.policies.slot_assignment`).

    Raises:
        ValueError: the env has no taggers and runners, or a policy plays both roles.
    """
    if roles is None or not {TAGGER, RUNNER} <= set(roles):
        raise ValueError(f"--vs-random needs an env of taggers and runners (Tag); "
                         f"{config.trainer.env} has roles {sorted(set(roles or []))}")
    teams: dict[str, list[str]] = {TAGGER: [], RUNNER: []}
    for name, ids in names_of_agents.items():
        played = {roles[i] for i in ids}
        if len(played) != 1:
            raise ValueError(f"--vs-random needs separate tagger and runner policies; "
                             f"policy {name!r} plays {sorted(played)}")
        teams[played.pop()].append(name)
    return teams


def _cell(played: PlayedEpisodes, runner: torch.Tensor) -> dict[str, float | None]:
    """The runners' statistics of one pairing (``runner``: ``(agents,)`` bool)."""
    slots = runner.repeat(played.games).to(played.terminated.device)
    tagged = played.terminated & slots
    escaped = ~played.terminated & slots
    count = int(tagged.sum())
    return {
        "runners_tagged_per_game": count / played.games,
        "mean_steps_to_tag": float(played.lengths[tagged].mean()) if count else None,
        "runners_escaping_per_game": int(escaped.sum()) / played.games,
        "mean_runner_steps": float(played.lengths[slots].mean()),
    }


def versus_random(config: Config, models: dict[str, torch.nn.Module], episodes: int,
                  device: torch.device, *, seed: int | None = None,
                  stochastic: bool = False) -> dict[str, Any]:
    """Play ``episodes`` games under each pairing of :data:`PAIRINGS` (the same seed
    for all) and return ``{"env", "episodes", "stochastic", "identical_starts",
    "runners_per_game",
    "pairings": [{"taggers", "runners", "runners_tagged_per_game", "mean_steps_to_tag",
    "runners_escaping_per_game", "mean_runner_steps"}], "entropy": {policy: {"mean",
    "uniform"}}}`` (``mean_steps_to_tag`` is ``None`` where no runner was tagged;
    ``mean_runner_steps``: steps in the game, tagged or not; ``identical_starts``: every
    game starts from the same cells; entropies in nats, over the live steps of trained
    taggers vs trained runners)."""
    from gpu_vecenv.train.distributions import ActionSpec
    from gpu_vecenv.train.policies import agent_roles, slot_assignment
    from gpu_vecenv.train.training_env import make_env

    probe = make_env(config, torch.device("cpu") if device.type == "cpu" else device,
                     num_envs=2)
    roles = agent_roles(probe)
    teams = team_policies(config, roles, slot_assignment(config, probe))
    spec = ActionSpec.from_space(probe.single_action_space)
    starts, _ = probe.reset(seed=config.trainer.seed if seed is None else seed)
    first, second = starts.reshape(2, -1)
    probe.close()
    runner = torch.tensor([r == RUNNER for r in roles])
    result: dict[str, Any] = {"env": config.trainer.env, "episodes": episodes,
                              "stochastic": stochastic,
                              "identical_starts": bool(torch.equal(first, second)),
                              "runners_per_game": int(runner.sum()), "pairings": []}
    for taggers, runners in PAIRINGS:
        random_names = ((teams[TAGGER] if taggers == "random" else [])
                        + (teams[RUNNER] if runners == "random" else []))
        both_trained = not random_names
        played = play_episodes(config, models, episodes, device, seed=seed,
                               random_policy=random_names, stochastic=stochastic,
                               entropy=both_trained)
        result["pairings"].append({"taggers": taggers, "runners": runners,
                                   **_cell(played, runner)})
        if both_trained:
            uniform = (sum(math.log(n) for n in spec.nvec) if spec.kind != "box"
                       else None)
            result["entropy"] = {name: {"mean": total / count, "uniform": uniform}
                                 for name, (total, count) in played.entropy.items()}
    return result


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _change(new: float | None, old: float | None) -> str:
    if new is None or old is None or old == 0:
        return "n/a"
    return f"{100.0 * (new - old) / old:+.0f}%"


def format_table(result: dict[str, Any]) -> str:
    """The 2x2 table of :func:`versus_random`'s result, the two comparisons the goals
    of a trained Tag run are about, and the entropies. With one runner a game the cells
    are the share of games ending in a tag, the mean steps to it and the mean game
    length (an escape counting the whole game), which the comparisons use."""
    cells = {(p["taggers"], p["runners"]): p for p in result["pairings"]}
    one = result["runners_per_game"] == 1
    actions = "sampled from the policies" if result["stochastic"] else "most likely actions"
    runners = "1 runner" if one else f"{result['runners_per_game']} runners"
    lines = [f"{result['episodes']} games per pairing, the same seeds for all ({actions}); "
             f"{runners} per game"]
    if result.get("identical_starts") and not result["stochastic"]:
        lines.append("note: every game starts from the same cells and the trained policies "
                     "play their most likely actions, so the trained/trained games are all "
                     "the same game (--stochastic samples)")
    lines += [("cells: games ending in a tag / mean steps to the tag / mean game length "
               "(an escape counts the whole game)") if one else
              ("cells: runners tagged per game / mean steps to be tagged / runners "
               "escaping per game"),
              f"{'':<16}{'trained runners':<28}random runners"]
    for taggers in ("trained", "random"):
        row = f"{taggers + ' taggers':<16}"
        for runner_kind in ("trained", "random"):
            c = cells[(taggers, runner_kind)]
            if one:
                text = (f"{100 * c['runners_tagged_per_game']:.0f}% / "
                        f"{_fmt(c['mean_steps_to_tag'], 1)} / {_fmt(c['mean_runner_steps'], 1)}")
            else:
                text = (f"{_fmt(c['runners_tagged_per_game'])} / "
                        f"{_fmt(c['mean_steps_to_tag'], 1)} / "
                        f"{_fmt(c['runners_escaping_per_game'])}")
            row += text.ljust(28)
        lines.append(row.rstrip())
    tt, tr = cells[("trained", "trained")], cells[("trained", "random")]
    rr = cells[("random", "random")]
    if one:
        lines.append(
            f"trained runner vs random runner, against trained taggers: tagged in "
            f"{_change(tt['runners_tagged_per_game'], tr['runners_tagged_per_game'])} of "
            f"the games, game length {_change(tt['mean_runner_steps'], tr['mean_runner_steps'])}")
        lines.append(
            f"trained taggers vs random taggers, against a random runner: tags "
            f"{_change(tr['runners_tagged_per_game'], rr['runners_tagged_per_game'])}, "
            f"game length {_change(tr['mean_runner_steps'], rr['mean_runner_steps'])}")
    else:
        lines.append(
            f"trained runners vs random runners, against trained taggers: tagged "
            f"{_change(tt['runners_tagged_per_game'], tr['runners_tagged_per_game'])}, "
            f"steps to be tagged {_change(tt['mean_steps_to_tag'], tr['mean_steps_to_tag'])}, "
            f"steps in the game {_change(tt['mean_runner_steps'], tr['mean_runner_steps'])}")
        lines.append(
            f"trained taggers vs random taggers, against random runners: tags "
            f"{_change(tr['runners_tagged_per_game'], rr['runners_tagged_per_game'])}, "
            f"steps to tag {_change(tr['mean_steps_to_tag'], rr['mean_steps_to_tag'])}")
    for name, e in result.get("entropy", {}).items():
        uniform = "" if e["uniform"] is None else f" (uniform: {e['uniform']:.2f})"
        lines.append(f"{name} policy entropy in the game, trained vs trained: "
                     f"{e['mean']:.2f} nats{uniform}")
    return "\n".join(lines)
