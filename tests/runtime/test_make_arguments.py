"""``make_vec`` in the spellings users bring: ``num_games=`` for a multi-agent env (and
what ``num_envs`` means there), Gymnasium's ``vector_kwargs``; and the time limits that
``gpu-vecenv list`` shows."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest
from gymnasium.vector import AutoresetMode

import gpu_vecenv
import gpu_vecenv.env_ids
from gpu_vecenv.cli import main as cli_main
from gpu_vecenv.env_ids import is_single_agent, load_definition, shipped_ids

MAKERS = {
    "gymnasium": lambda env_id, **kw: gym.make_vec(env_id, device="cpu", **kw),
    "gpu_vecenv": lambda env_id, **kw: gpu_vecenv.make_vec(env_id, device="cpu", **kw),
}


@pytest.mark.parametrize("maker", sorted(MAKERS))
@pytest.mark.parametrize("env_id", ["GPUTag-v0", "GPUTagGrid-v0"])
def test_num_games_makes_that_many_games_and_says_nothing(maker, env_id):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = MAKERS[maker](env_id, num_games=3)
        also = MAKERS[maker](env_id, num_envs=3, num_games=3)  # agreeing: fine
    assert env.num_games == also.num_games == 3
    assert env.num_envs == 3 * env.num_agents == 33
    assert env.observation_space.shape[0] == 33


def test_gymnasium_warns_when_num_envs_counts_games():
    with pytest.warns(UserWarning, match=r"num_envs=8 counts games .* env.num_envs is 88 "
                                         r"vector slots .* Pass num_games=8") as caught:
        env = gym.make_vec("GPUTag-v0", num_envs=8, device="cpu")
    assert env.num_games == 8 and env.num_envs == 88  # unchanged: num_envs counts games
    assert caught[0].filename == __file__  # points at the caller's make_vec line


def test_no_warning_where_num_envs_is_not_a_gymnasium_callers():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gpu_vecenv.make_vec("GPUTag-v0", 8, device="cpu").num_envs == 88  # documented
        assert gym.make_vec("GPUTag-v0", device="cpu").num_envs == 11  # Gymnasium's default 1
        assert gym.make_vec("GPUCartPole-v1", num_envs=8, device="cpu").num_envs == 8


@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_num_games_refused_where_it_means_nothing_or_disagrees(maker):
    with pytest.raises(TypeError, match="GPUCartPole-v1 is a single-agent env: num_games"):
        MAKERS[maker]("GPUCartPole-v1", num_games=4)
    with pytest.raises(ValueError, match="num_envs=3 and num_games=4 disagree"):
        MAKERS[maker]("GPUTag-v0", num_envs=3, num_games=4)
    with pytest.raises(ValueError, match="the number of games must be >= 1"):
        MAKERS[maker]("GPUTag-v0", num_games=0)


def test_sb3_view_takes_num_games():
    from gpu_vecenv.adapters.sb3 import SB3VecEnv

    assert SB3VecEnv("GPUTagGrid-v0", num_games=2, device="cpu").num_envs == 22


@pytest.mark.parametrize("env_id", ["GPUCartPole-v1", "GPUTag-v0"])
def test_vector_kwargs_are_accepted(env_id):
    env = gpu_vecenv.make_vec(env_id, 2, device="cpu",
                              vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP,
                                             "copy": False})
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP and env.copy is False
    # the same option both ways is fine when it agrees, in any spelling of the mode
    env = gpu_vecenv.make_vec(env_id, 2, device="cpu", autoreset_mode="same_step",
                              vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP


def test_the_adapters_default_mode_gives_way_to_vector_kwargs():
    from gpu_vecenv.adapters.sb3 import SB3VecEnv

    venv = SB3VecEnv("GPUCartPole-v1", 2, device="cpu",
                     vector_kwargs={"autoreset_mode": AutoresetMode.NEXT_STEP})
    assert venv.autoreset_mode == AutoresetMode.NEXT_STEP


def test_gymnasium_make_vec_refuses_vector_kwargs_for_any_vector_entry_point():
    """Gymnasium's own rule, before it calls our maker (its CartPole-v1 alike): the docs
    send Gymnasium's callers to autoreset_mode=..., and this test tells if that changes."""
    for env_id in ("CartPole-v1", "GPUCartPole-v1"):
        with pytest.raises(gym.error.Error, match="vector_kwargs"):
            gym.make_vec(env_id, 2, vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})


def test_bad_vector_kwargs_are_clear_errors():
    with pytest.raises(TypeError, match=r"vector_kwargs \['shared_memory'\] are options of "
                                        r"Gymnasium's SyncVectorEnv"):
        gpu_vecenv.make_vec("GPUCartPole-v1", 2, vector_kwargs={"shared_memory": True})
    with pytest.raises(ValueError, match="autoreset_mode given twice"):
        gpu_vecenv.make_vec("GPUCartPole-v1", 2, autoreset_mode="NextStep",
                            vector_kwargs={"autoreset_mode": "SameStep"})
    with pytest.raises(TypeError, match="vector_kwargs must be a dict"):
        gpu_vecenv.make_vec("GPUCartPole-v1", 2, vector_kwargs=[("copy", False)])


def test_list_shows_every_time_limit(capsys):
    assert cli_main(["list"]) == 0
    limits = {line.split()[0]: line.split()[-1] for line in capsys.readouterr().out.splitlines()}
    shipped = {k: v for k, v in limits.items() if k in gpu_vecenv.env_ids.SHIPPED_IDS}

    def declared(env_id: str) -> int:  # a game ends at its params' episode_length
        definition = load_definition(env_id)
        if is_single_agent(definition):
            return definition.max_episode_steps
        return definition.make_params().episode_length

    assert shipped == {env_id: str(declared(env_id)) for env_id in shipped_ids()}
    assert shipped["GPUTag-v0"] == "100"  # not Gymnasium's None
