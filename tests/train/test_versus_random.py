"""``gpu-vecenv eval RUN --vs-random``: trained or random taggers x trained or random
runners on the same games (:mod:`gpu_vecenv.train.versus_random`)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from gpu_vecenv.cli import main as cli_main
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.evaluation import evaluate, play_episodes
from gpu_vecenv.train.trainer import Trainer
from gpu_vecenv.train.versus_random import PAIRINGS, format_table, versus_random

GAMES = {"num_taggers": 2, "num_runners": 4, "grid_length": 3.0, "tagging_distance": 0.1,
         "episode_length": 30}


def _config(tmp_path, policies: list[str] | None = None):
    overrides = ["ppo.num_steps=4", "ppo.hidden_sizes=[8]", *(policies or [])]
    return load_config(None, overrides, env="GPUTag-v0", num_envs=2, total_steps=48,
                       device="cpu", backend="torch", progress=False, tensorboard=False,
                       eval_episodes=0, run_dir=str(tmp_path / "run"), env_kwargs=GAMES)


@pytest.fixture(scope="module")
def tag_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vs_random")
    trainer = Trainer(_config(tmp))
    trainer.run()
    return trainer


def test_the_four_pairings_count_tags_as_the_returns_do(tag_run):
    """Every pairing plays the same games: per game, tagged + escaping runners = all of
    them; the random/random cell's tags equal the taggers' summed return (1 per tag in
    these games) of an independent ``evaluate`` of random play on the same seed."""
    config, device = tag_run.config, torch.device("cpu")
    models = {g.name: g.learner.model for g in tag_run.groups}
    result = versus_random(config, models, 12, device, seed=3, stochastic=True)
    cells = {(p["taggers"], p["runners"]): p for p in result["pairings"]}
    assert list(cells) == list(PAIRINGS) and result["runners_per_game"] == 4
    for cell in cells.values():
        assert cell["runners_tagged_per_game"] + cell["runners_escaping_per_game"] == 4
        assert 0 < cell["runners_tagged_per_game"] < 4  # neither none nor all: informative
        assert 0 < cell["mean_steps_to_tag"] <= GAMES["episode_length"]
    random_play = evaluate(config, models, 12, device, seed=3, random_policy=True)
    tags = random_play["policies"]["tagger"]["mean_return_per_game"]
    assert cells[("random", "random")]["runners_tagged_per_game"] == pytest.approx(tags)
    # Barely trained networks (last layer initialised at gain 0.01) are near uniform.
    uniform = math.log(11) * 2
    for name in ("tagger", "runner"):
        assert result["entropy"][name]["uniform"] == pytest.approx(uniform)
        assert uniform - 0.05 < result["entropy"][name]["mean"] <= uniform + 1e-5


def test_the_command_prints_the_table_and_writes_json(tag_run, tmp_path, capsys):
    out = tmp_path / "vs.json"
    assert cli_main(["eval", str(tag_run.run_dir), "--vs-random", "--episodes", "6",
                     "--device", "cpu", "--seed", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("GPUTag-v0, checkpoint at step 48: 6 games per pairing")
    assert "trained taggers " in text and "random taggers " in text
    assert "runner policy entropy in the game, trained vs trained" in text
    saved = json.loads(out.read_text())
    assert saved["global_step"] == 48 and len(saved["pairings"]) == 4


def test_a_shared_policy_or_a_single_agent_env_is_refused(tmp_path):
    shared = _config(tmp_path, ["policies.shared.agents=[tagger,runner]"])
    models = {"shared": torch.nn.Identity()}
    with pytest.raises(ValueError, match="separate tagger and runner policies"):
        versus_random(shared, models, 2, torch.device("cpu"))
    cartpole = load_config(None, [], env="GPUCartPole-v1", device="cpu")
    with pytest.raises(ValueError, match="an env of taggers and runners"):
        versus_random(cartpole, {}, 2, torch.device("cpu"))


def _grid_config(tmp_path, **env_kwargs):
    return load_config(None, ["ppo.num_steps=4", "ppo.hidden_sizes=[8]"],
                       env="GPUTagGrid-v0", num_envs=2, total_steps=2 * 11 * 4 * 2,
                       device="cpu", backend="torch", progress=False, tensorboard=False,
                       eval_episodes=0, run_dir=str(tmp_path / "run"),
                       env_kwargs={"grid_length": 4, "episode_length": 20, **env_kwargs})


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory):
    trainer = Trainer(_grid_config(tmp_path_factory.mktemp("vs_random_grid")))
    trainer.run()
    return trainer


def test_gridworld_one_runner_a_game_is_a_tag_rate_and_a_game_length(grid_run):
    """Gridworld Tag (10 taggers, one runner whose tag ends the game): each cell's tagged
    and escaping shares add up to 1 game, ``mean_runner_steps`` is the game length the
    plain evaluation measures, and the table prints rates and game lengths, which the
    comparisons use (a tag rate near 1 under random play says little by itself)."""
    config, device = grid_run.config, torch.device("cpu")
    models = {g.name: g.learner.model for g in grid_run.groups}
    result = versus_random(config, models, 16, device, seed=4, stochastic=True)
    cells = {(p["taggers"], p["runners"]): p for p in result["pairings"]}
    assert result["runners_per_game"] == 1
    for cell in cells.values():
        assert cell["runners_tagged_per_game"] + cell["runners_escaping_per_game"] == 1
    random_play = evaluate(config, models, 16, device, seed=4, random_policy=True)
    assert cells[("random", "random")]["mean_runner_steps"] == pytest.approx(
        random_play["mean_length"])
    text = format_table(result)
    assert "1 runner per game" in text
    assert "games ending in a tag / mean steps to the tag / mean game length" in text
    rr = cells[("random", "random")]
    assert (f"random taggers  {100 * cells[('random', 'trained')]['runners_tagged_per_game']:.0f}%"
            in text)
    assert f"{rr['mean_runner_steps']:.1f}" in text.splitlines()[4]
    assert "against a random runner: tags " in text and "game length " in text


def test_a_fixed_start_with_most_likely_actions_is_one_game_and_is_flagged(grid_run, tmp_path):
    """WarpDrive's start puts every game on the same cells, and the rules are
    deterministic: the most likely actions of both trained teams play one game over and
    over, so the trained/trained cell is a single game. The result says so and the table
    warns; random starts, or sampled actions, do not warn."""
    config, device = grid_run.config, torch.device("cpu")
    models = {g.name: g.learner.model for g in grid_run.groups}
    played = play_episodes(config, models, 8, device, seed=1)
    assert torch.unique(played.lengths).numel() == 1  # one game, 88 slots
    result = versus_random(config, models, 8, device, seed=1)
    assert result["identical_starts"]
    assert "the trained/trained games are all the same game" in format_table(result)
    sampled = versus_random(config, models, 8, device, seed=1, stochastic=True)
    assert "the same game" not in format_table(sampled)
    shuffled = _grid_config(tmp_path, random_start=True)
    result = versus_random(shuffled, models, 8, device, seed=1)
    assert not result["identical_starts"]
    assert "the same game" not in format_table(result)
