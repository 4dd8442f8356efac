"""``tag_grid_ppo``: what its taggers and runner observe, and where its games start,
let them learn to chase and to flee (issue 30: trained taggers that bumped into walls).

WarpDrive's full observation lists every agent's cell and marks the observer with a
one-hot, so a policy shared by the taggers finds its own cell, and so the walls and its
way to the runner, only as a product of two inputs; and WarpDrive's start puts every
game on the same cells, so the policies learn one route (the runner sits in its corner,
the taggers walk there) instead of a chase.
"""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv.envs import tag_grid
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.trainer import Trainer


def _shipped_params(**overrides) -> tag_grid.TagGridParams:
    config = load_config("tag_grid_ppo")
    assert config.trainer.env == "GPUTagGrid-v0"
    return tag_grid.TagGridParams(**{**config.trainer.env_kwargs, **overrides})


def random_games(params: tag_grid.TagGridParams, games: int, seed: int = 0):
    """``games`` states with every agent on a uniform random cell."""
    g = torch.Generator().manual_seed(seed)
    L, A = params.grid_length, params.num_agents
    cells = torch.randint(0, L + 1, (2, games, A), generator=g, dtype=torch.int32)
    t = torch.randint(0, params.episode_length, (games,), generator=g, dtype=torch.int32)
    return {"x": cells[0], "y": cells[1], "t": t}


def _what_each_agent_needs(params, state) -> torch.Tensor:
    """``(G, A, 4)``: own x/L, y/L (the walls) and the offset to the target / L (a
    tagger's: the runner; the runner's: its nearest tagger by squared distance)."""
    x, y = state["x"].float(), state["y"].float()
    dx, dy = x[:, :-1] - x[:, -1:], y[:, :-1] - y[:, -1:]
    nearest = torch.argmin(dx * dx + dy * dy, dim=1, keepdim=True)
    tx = torch.cat([x[:, -1:].expand_as(dx), torch.gather(x, 1, nearest)], dim=1)
    ty = torch.cat([y[:, -1:].expand_as(dy), torch.gather(y, 1, nearest)], dim=1)
    L = float(params.grid_length)
    return torch.stack([x / L, y / L, (tx - x) / L, (ty - y) / L], dim=2)


def linear_fit_error(params, games: int = 4000) -> float:
    """The largest RMS error, over roles and the 4 quantities, of the best affine map
    from an agent's observation to what it needs (least squares over random games)."""
    state = random_games(params, games)
    obs = tag_grid.observe(params, state).double()
    need = _what_each_agent_needs(params, state).double()
    worst = 0.0
    for agents in (slice(0, params.num_taggers), slice(params.num_taggers, None)):
        o = obs[:, agents].reshape(-1, obs.shape[-1])
        n = need[:, agents].reshape(-1, 4)
        design = torch.cat([o, torch.ones(o.shape[0], 1, dtype=o.dtype)], dim=1)
        # SVD (gelsd): the role column is constant within a role, and gelsy then misfits
        solution = torch.linalg.lstsq(design, n, driver="gelsd").solution
        worst = max(worst, float(((design @ solution - n) ** 2).mean(0).sqrt().max()))
    return worst


def test_each_agent_observes_its_cell_and_its_target_as_plain_numbers():
    """An affine map of the observation gives every agent its own cell and its offset
    to its target exactly; under WarpDrive's full observation the best one misses a
    tagger's own cell by about a quarter of the grid."""
    assert linear_fit_error(_shipped_params()) < 1e-6
    assert linear_fit_error(_shipped_params(use_full_observation=True)) > 0.2


def chase_probabilities(model: torch.nn.Module, params: tag_grid.TagGridParams,
                        games: int = 2000) -> tuple[float, float]:
    """On random games, the taggers' mean probability (from ``model``, the tagger
    policy) of a move that brings them closer to the runner, and of a move into a wall.
    Uniform play: about 0.37 and 0.07 on 11x11 cells."""
    state = random_games(params, games, seed=1)
    obs = tag_grid.observe(params, state)[:, :-1]
    x, y, L = state["x"][:, :-1], state["y"][:, :-1], params.grid_length
    moves = torch.tensor(tag_grid.MOVES)
    wanted_x, wanted_y = x[..., None] + moves[:, 0], y[..., None] + moves[:, 1]
    new_x, new_y = wanted_x.clamp(0, L), wanted_y.clamp(0, L)
    runner_x, runner_y = state["x"][:, -1:], state["y"][:, -1:]
    now = (x - runner_x).abs() + (y - runner_y).abs()
    closer = ((new_x - runner_x[..., None]).abs() + (new_y - runner_y[..., None]).abs()
              < now[..., None])
    into_wall = (new_x != wanted_x) | (new_y != wanted_y)
    with torch.no_grad():
        probs = torch.softmax(model.actor(model.normalizer(obs)), dim=-1)
    apart = now > 0
    return (float((probs * closer).sum(-1)[apart].mean()),
            float((probs * into_wall).sum(-1)[apart].mean()))


@pytest.mark.slow
def test_taggers_trained_on_the_shipped_games_chase_and_keep_off_the_walls(tmp_path):
    """200k agent-steps of the shipped games (8 games, a smaller network, a higher
    learning rate: about 40 s on 2 cores) teach the taggers to step towards the runner
    from wherever they stand and to keep off the walls. Measured at these settings:
    0.39 and 0.07 under WarpDrive's full observation and start, 0.35 and 0.06 with the
    full observation alone, 0.52 and 0.06 with WarpDrive's start alone."""
    config = load_config("tag_grid_ppo", ["ppo.hidden_sizes=[64,64]",
                                          "ppo.learning_rate=0.002"],
                         num_envs=8, total_steps=200_000, seed=1, device="cpu",
                         backend="torch", progress=False, tensorboard=False,
                         eval_episodes=0, run_dir=str(tmp_path / "run"))
    trainer = Trainer(config)
    trainer.run()
    taggers = {g.name: g.learner.model for g in trainer.groups}["tagger"]
    towards, into_wall = chase_probabilities(
        taggers, tag_grid.TagGridParams(**config.trainer.env_kwargs))
    assert towards > 0.6 and into_wall < 0.03, (towards, into_wall)


def test_the_shipped_games_start_from_random_cells():
    """Each game of a batch, and each reset of a game, starts elsewhere."""
    from gpu_vecenv.entry_points import make_vec

    config = load_config("tag_grid_ppo")
    env = make_vec("GPUTagGrid-v0", 4, device="cpu", backend="torch",
                   **config.trainer.env_kwargs)
    starts = [env.reset(seed=seed)[0].reshape(4, -1) for seed in (0, 1)]
    assert len({tuple(game.tolist()) for s in starts for game in s}) == 8
