"""Properties of the learners that a wrong implementation breaks: PPO's ratio leaves 1,
target-KL stops the epochs, truncated steps keep their final observation."""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.trainer import Trainer

COMMON = {"device": "cpu", "backend": "torch", "progress": False, "tensorboard": False,
          "eval_episodes": 0, "checkpoint_interval": 0}


def _trainer(tmp_path, *overrides, **trainer):
    return Trainer(load_config(None, list(overrides), run_dir=str(tmp_path),
                               **{**COMMON, **trainer}))


def test_ppo_ratio_departs_from_one(tmp_path):
    # Old log-probs come from the roll-out, so after the first minibatch step the
    # ratio is no longer 1: the KL estimate and the clip fraction become positive.
    t = _trainer(tmp_path, "ppo.num_steps=16", "ppo.learning_rate=0.01", num_envs=16)
    t._collect()
    metrics = t._update()["default"]
    assert float(metrics["approx_kl"]) > 1e-5
    assert float(metrics["clip_fraction"]) > 0.0
    assert float(metrics["epochs"]) == 4.0


def test_target_kl_stops_the_epochs(tmp_path):
    t = _trainer(tmp_path, "ppo.num_steps=16", "ppo.learning_rate=0.01", "ppo.target_kl=0.0",
                 num_envs=16)
    t._collect()
    assert float(t._update()["default"]["epochs"]) == 1.0


def test_learning_rate_annealing(tmp_path):
    t = _trainer(tmp_path, "ppo.num_steps=4", "ppo.learning_rate=0.001", num_envs=4,
                 total_steps=64)
    result = t.run()
    rates = [row["learning_rate"] for row in result.metrics]
    assert rates[0] == pytest.approx(0.001) and rates == sorted(rates, reverse=True)
    assert 0 < rates[-1] < 0.001


def test_truncated_steps_store_their_final_observation(tmp_path):
    # Episodes cut at 5 steps: the stored final_obs of a truncated step is its last
    # observation, not the next row's reset observation, and terminated stays False.
    t = _trainer(tmp_path, "ppo.num_steps=12", num_envs=4,
                 env_kwargs={"max_episode_steps": 5})
    t._collect()
    s = t.groups[0].learner.storage
    truncated = s.done & ~s.terminated
    assert bool(truncated[4].all())  # every env hits the limit at its 5th step
    assert not torch.equal(s.final_obs[4], s.obs[5])
    torch.testing.assert_close(s.final_obs[3], s.obs[4])  # no episode end: the next obs


def test_ddpg_replay_keeps_final_obs_and_terminated(tmp_path):
    t = _trainer(tmp_path, "trainer.algo=ddpg", "ddpg.learning_starts=1000", env="GPUPendulum-v1",
                 num_envs=2, env_kwargs={"max_episode_steps": 3})
    for _ in range(3):
        t._collect()
        t.global_step += t.batch
    replay = t.groups[0].learner.replay
    assert replay.size == 6
    assert not bool(replay.terminated[:6].any())  # Pendulum never terminates
    # rows 4, 5 are the truncated last steps: next_obs is the episode's last observation
    # (its cos/sin of the angle are a unit vector), distinct from the reset observation
    assert not torch.equal(replay.next_obs[4:6], t.obs)
    torch.testing.assert_close(replay.next_obs[4:6, :2].norm(dim=1), torch.ones(2))
    torch.testing.assert_close(replay.next_obs[0:2], replay.obs[2:4])


@pytest.mark.parametrize(("num_envs", "num_minibatches", "norm_adv"),
                         [(2, 8, False), (4, 8, True)])
def test_ppo_refuses_minibatches_too_small_to_learn_from(num_envs, num_minibatches, norm_adv):
    """2 envs x 2 steps in 8 minibatches would be empty; 4 x 2 in 8 would be one sample
    each, whose normalized advantage is NaN: both are refused when the learner is built."""
    from gpu_vecenv.train.config import PPOConfig
    from gpu_vecenv.train.train_function import train

    with pytest.raises(ValueError, match="minibatches of [01] sample"):
        train("GPUCartPole-v1", PPOConfig(num_steps=2, num_minibatches=num_minibatches,
                                          norm_adv=norm_adv),
              num_envs=num_envs, total_steps=64, device="cpu", progress=False,
              tensorboard=False)
