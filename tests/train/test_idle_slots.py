"""Idle multi-agent slots weigh nothing in on-policy training (issue 30 item 1).

A Tag runner that is tagged leaves its game: its slot reports ``terminated`` once, then
zeros (observation, reward, no ``done``, ``info["active"]`` False) until the game
resets. Those idle rows are no samples of the game. These tests show what they
contribute to the PPO and A2C updates (losses, advantages, value targets, advantage
normalisation, observation normalisation, logged metrics) and to the episode statistics:
nothing. Each invariance test also runs the same comparison on an unmasked learner, where
the idle rows do change the update, so the comparison can see a contribution.
"""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv.train import losses, masked
from gpu_vecenv.train.config import PPOConfig
from gpu_vecenv.train.logger import EpisodeStats
from gpu_vecenv.train.ppo import ppo_minibatch_loss
from tests.train import masked_worker as rollout


def _updated(algo: str, idle: str, masked_learner: bool = True, norm_adv: bool = True):
    learner = rollout.build(algo, masked=masked_learner, norm_adv=norm_adv)
    rollout.fill(learner, idle=idle)
    values, advantages, returns = learner.advantages()
    metrics = learner.update()
    return learner, metrics, (values, advantages, returns)


def _same_state(a, b) -> bool:
    sa, sb = a.model.state_dict(), b.model.state_dict()
    return all(torch.allclose(sa[k], sb[k], rtol=1e-6, atol=1e-7) for k in sa)


@pytest.mark.parametrize("norm_adv", [True, False])
@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_idle_rows_change_nothing_in_the_update(algo, norm_adv):
    """Idle rows full of random observations, actions, log-probs, rewards and final
    observations give the same weights, observation statistics and metrics as the zeros
    the env writes there; advantages and value targets of live rows are the same too."""
    zeros, m_zeros, (_, adv_z, ret_z) = _updated(algo, "zeros", norm_adv=norm_adv)
    junk, m_junk, (_, adv_j, ret_j) = _updated(algo, "garbage", norm_adv=norm_adv)
    live = zeros.storage.mask.bool()
    assert not live.all() and live.any()
    torch.testing.assert_close(adv_z[live], adv_j[live], rtol=0, atol=0)
    torch.testing.assert_close(ret_z[live], ret_j[live], rtol=0, atol=0)
    assert _same_state(zeros, junk)  # weights and observation normaliser
    for name, value in m_zeros.items():
        torch.testing.assert_close(value, m_junk[name], rtol=1e-6, atol=1e-7, msg=name)
    assert float(m_zeros["live_fraction"]) == pytest.approx(float(live.float().mean()))
    # The control: without the mask the same garbage does change the update.
    plain_zeros = _updated(algo, "zeros", masked_learner=False, norm_adv=norm_adv)[0]
    plain_junk = _updated(algo, "garbage", masked_learner=False, norm_adv=norm_adv)[0]
    assert not _same_state(plain_zeros, plain_junk)
    # ... and with zeros in the idle rows (what the env gives) the mask changes it too.
    assert not _same_state(zeros, plain_zeros)


@pytest.mark.parametrize("clip_vloss", [True, False])
def test_masked_ppo_loss_equals_the_loss_of_the_live_rows_alone(clip_vloss):
    """Loss, statistics and gradient of a minibatch with idle rows = those of its live
    rows alone: every mean and the advantage normalisation are over live rows."""
    learner = rollout.build("ppo")
    rollout.fill(learner, idle="garbage")
    s = learner.storage
    values, advantages, returns = learner.advantages()
    rows = {"obs": s.flat(s.obs), "actions": s.flat(s.actions),
            "old_log_probs": s.flat(s.log_probs), "advantages": advantages.reshape(-1),
            "returns": returns.reshape(-1), "old_values": values.reshape(-1)}
    mask = s.flat(s.mask)
    live = mask.bool()
    config = PPOConfig(ent_coef=0.05, clip_vloss=clip_vloss)
    model = learner.model

    def loss_and_grads(batch, m):
        model.zero_grad()
        loss, stats = ppo_minibatch_loss(model, config, **batch, mask=m)
        loss.backward()
        return stats, [p.grad.clone() for p in model.parameters()]

    stats_masked, grads_masked = loss_and_grads(rows, mask)
    stats_live, grads_live = loss_and_grads({k: v[live] for k, v in rows.items()}, None)
    torch.testing.assert_close(stats_masked, stats_live, rtol=1e-5, atol=1e-6)
    for a, b in zip(grads_masked, grads_live, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    stats_all, _ = loss_and_grads(rows, None)  # unmasked: the idle rows count
    assert not torch.allclose(stats_all, stats_live, rtol=1e-3)


def test_masked_moments_are_those_of_the_live_samples():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(40, 6, generator=g) * 3 + 1
    mask = (torch.rand(40, generator=g) < 0.4).float()
    live = x[mask.bool()]
    mean, var, count = masked.mean_var(x, mask, dim=0, unbiased=False)
    torch.testing.assert_close(mean, live.mean(0))
    torch.testing.assert_close(var, live.var(0, unbiased=False))
    assert float(count) == live.shape[0]
    flat_mask = mask[:, None].expand_as(x).contiguous()
    mean, var, _ = masked.mean_var(x, flat_mask)
    torch.testing.assert_close(mean, live.mean())
    torch.testing.assert_close(var, live.var())
    normalized = masked.normalize_advantages(x, flat_mask)
    torch.testing.assert_close(normalized[mask.bool()], losses.normalize_advantages(live))
    weights = masked.row_weights(mask)
    torch.testing.assert_close(losses.weighted_mean(x[:, 0], weights), live[:, 0].mean())


@pytest.mark.parametrize("live", [0, 1])
def test_too_few_live_rows_give_zeros_not_nan(live):
    """A minibatch without a live row (every runner of the sampled rows idle), or with
    one, has no variance: everything stays finite and the idle rows still weigh 0."""
    x = torch.randn(10)
    mask = torch.zeros(10)
    mask[:live] = 1.0
    assert torch.isfinite(masked.normalize_advantages(x, mask)).all()
    assert float(losses.weighted_mean(x, masked.row_weights(mask))) == pytest.approx(
        float(x[:live].sum()))
    learner = rollout.build("ppo", minibatches=1)
    obs = learner.storage.obs
    before = learner.model.normalizer.state_dict()
    learner.model.normalizer.update(obs.normal_(), torch.zeros(obs.shape[:-1]))
    after = learner.model.normalizer.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_observation_statistics_fold_in_live_rows_only():
    learner = rollout.build("ppo")
    rollout.fill(learner, idle="garbage")
    s = learner.storage
    reference = rollout.build("ppo").model.normalizer
    reference.update(s.obs[s.mask.bool()])
    learner.model.normalizer.update(s.obs, s.mask)
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(learner.model.normalizer.state_dict()[name], value)


def test_idle_steps_count_in_no_episode_length():
    """A runner tagged at its 3rd step, idle 4 steps, then a new game of 2 steps that
    ends by truncation: lengths 3 and 2 (unmasked statistics would say 3 and 6)."""
    stats = EpisodeStats(1, torch.device("cpu"), masked=True)
    plain = EpisodeStats(1, torch.device("cpu"))
    #          step: 1     2     3 (tag) idle x4                    new game: 1     2
    rewards = [0.0, 0.0, -10.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    done = [False, False, True, False, False, False, False, False, True]
    active = [True, True, False, False, False, False, True, True, True]  # after the step
    for r, d, a in zip(rewards, done, active, strict=True):
        stats.update(torch.tensor([r]), torch.tensor([d]), torch.tensor([a]))
        plain.update(torch.tensor([r]), torch.tensor([d]))
    assert stats.read() == {"episode_return": -4.5, "episode_length": 2.5, "episodes": 2.0}
    assert plain.read()["episode_length"] == 4.5
    with pytest.raises(ValueError, match="active"):
        stats.update(torch.tensor([0.0]), torch.tensor([False]))


def test_record_takes_active_exactly_when_masked():
    learner = rollout.build("ppo")
    args = (0, torch.zeros(8), torch.zeros(8, dtype=torch.bool),
            torch.zeros(8, dtype=torch.bool), torch.zeros(8, rollout.OBS_DIM))
    with pytest.raises(ValueError, match="active"):
        learner.record(*args)
    with pytest.raises(ValueError, match="active"):
        rollout.build("ppo", masked=False).record(*args, torch.ones(8, dtype=torch.bool))


# -- on the real env: GPUTag-v0 games small enough that runners are tagged in a roll-out --

TAG_GAMES = {"num_taggers": 1, "num_runners": 3, "grid_length": 2.0,
             "tagging_distance": 0.15, "episode_length": 10}


def _tag_trainer(tmp_path, steps: int = 24):
    from gpu_vecenv.train.config_loading import load_config
    from gpu_vecenv.train.trainer import Trainer

    config = load_config(None, [f"ppo.num_steps={steps}", "ppo.hidden_sizes=[8]",
                                "ppo.num_minibatches=2", "ppo.gamma=0.9"],
                         env="GPUTag-v0", num_envs=3, total_steps=10**6, device="cpu",
                         backend="torch", progress=False, tensorboard=False, seed=1,
                         eval_episodes=0, run_dir=str(tmp_path / "run"), env_kwargs=TAG_GAMES)
    trainer = Trainer(config)
    trainer.phases.collect()  # one roll-out from the reset: every slot starts live
    return trainer


def test_the_trainer_masks_exactly_the_rows_of_runners_out_of_their_game(tmp_path):
    """The mask stored for the runners equals what their done flags imply: a runner's row
    is live from its game's reset (a tagger's ``done``: every game ends for its taggers)
    until and including the row where it is tagged; the taggers are never idle. The
    runners' logged episode lengths count live rows only."""
    tagger, runner = _tag_trainer(tmp_path).groups
    s = runner.learner.storage
    games, runners = 3, TAG_GAMES["num_runners"]
    game_over = tagger.learner.storage.done.repeat_interleave(runners, dim=1)
    expected = torch.ones_like(s.done)
    for t in range(1, s.done.shape[0]):
        expected[t] = (expected[t - 1] & ~s.done[t - 1]) | game_over[t - 1]
    assert torch.equal(s.mask.bool(), expected)
    assert not expected.all()  # runners were tagged and waited for their game's reset
    assert bool(tagger.learner.storage.mask.all())
    lengths, ended = [], expected & s.done
    for slot in range(games * runners):
        rows = expected[:, slot].int().cumsum(0)
        starts = torch.cat([torch.zeros(1, dtype=torch.int32),
                            rows[ended[:, slot]]])
        lengths += (starts[1:] - starts[:-1]).tolist()
    read = runner.stats.read()
    assert read["episodes"] == len(lengths)
    assert read["episode_length"] == pytest.approx(sum(lengths) / len(lengths))


def test_a_tagged_runner_does_not_bootstrap_and_survivors_do_at_the_time_limit(tmp_path):
    """With a constant critic V = 5 and lambda = 0, an advantage is the one-step TD error:
    the tagged runner's row is ``r - V`` (terminated: its game is over for it), a row cut
    by the game's time limit ``r + gamma V(final_obs) - V`` (truncated), where
    ``final_obs`` is the last observation (time feature t / episode_length = 1), not the
    next game's first one, unless ``bootstrap_truncated`` is false; idle rows carry no
    done at all."""
    trainer = _tag_trainer(tmp_path)
    learner = trainer.groups[1].learner
    learner.config = PPOConfig(**{**learner.config.__dict__, "gae_lambda": 0.0})
    critic = learner.model.critic[-1]
    with torch.no_grad():
        critic.weight.zero_()
        critic.bias.fill_(5.0)
    s = learner.storage
    _, advantages, _ = learner.advantages()
    tagged, cut = s.terminated, s.done & ~s.terminated
    assert tagged.any() and cut.any()
    torch.testing.assert_close(advantages[tagged], s.rewards[tagged] - 5.0)
    torch.testing.assert_close(advantages[cut], s.rewards[cut] + 0.9 * 5.0 - 5.0)
    params = trainer.env.params
    assert set(s.rewards[tagged].tolist()) == {params.tag_penalty_for_runner}
    assert set(s.rewards[cut].tolist()) <= {params.end_of_game_reward_for_runner}
    time_feature = s.final_obs[..., -2]  # then the own-role feature
    assert bool((time_feature[cut] == 1.0).all())
    assert bool((s.done & ~s.mask.bool()).logical_not().all())
    # bootstrap_truncated=false: the time limit ends the game like a tag. (Bootstrapping
    # there feeds on itself: a critic that generalises from t/T = 0.99 to the unseen
    # t/T = 1 pulls the end-of-game target towards r / (1 - gamma).)
    learner.config = PPOConfig(**{**learner.config.__dict__, "bootstrap_truncated": False})
    _, advantages, returns = learner.advantages()
    torch.testing.assert_close(advantages[cut], s.rewards[cut] - 5.0)
    torch.testing.assert_close(advantages[tagged], s.rewards[tagged] - 5.0)
    torch.testing.assert_close(returns[cut], s.rewards[cut])


def test_each_policy_normalises_its_own_advantages(tmp_path):
    """Taggers' rewards 100 times larger change the taggers' first update but not the
    runners' (advantages, value targets and their normalisation are per policy)."""
    from gpu_vecenv.train.config_loading import load_config
    from gpu_vecenv.train.trainer import Trainer

    weights = []
    for scale in (1.0, 100.0):
        config = load_config(None, ["ppo.num_steps=8", "ppo.hidden_sizes=[8]"],
                             env="GPUTag-v0", num_envs=2, total_steps=10**6, device="cpu",
                             backend="torch", progress=False, tensorboard=False,
                             eval_episodes=0, run_dir=str(tmp_path / f"r{scale}"),
                             env_kwargs={**TAG_GAMES, "tag_reward_for_tagger": scale})
        trainer = Trainer(config)
        trainer.phases.collect()
        assert bool(trainer.groups[0].learner.storage.rewards.any())  # tags happened
        trainer.phases.update()
        weights.append([g.learner.model.state_dict() for g in trainer.groups])
    (tagger_1, runner_1), (tagger_100, runner_100) = weights
    assert all(torch.equal(runner_1[k], runner_100[k]) for k in runner_1)
    assert not all(torch.equal(tagger_1[k], tagger_100[k]) for k in tagger_1)


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_two_ranks_weigh_live_rows_as_one_process_does(tmp_path, algo):
    """Rank 0 holds 9 idle rows of its 24, rank 1 3 of 24: the masked means, advantage
    normalisation and observation statistics are over all ranks' live rows (not a mean
    of per-rank means), so the update equals one process's on the whole roll-out."""
    from pathlib import Path

    from tests.train.test_distributed import torchrun

    done = torchrun(str(Path(rollout.__file__)), algo, str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rank0, rank1 = (torch.load(tmp_path / f"update-{algo}.rank{r}.pt") for r in (0, 1))
    reference = rollout.build(algo, minibatches=1)
    rollout.fill(reference)
    metrics = reference.update()
    for name, value in reference.model.state_dict().items():
        assert torch.equal(rank0["model"][name], rank1["model"][name]), name
        torch.testing.assert_close(rank0["model"][name], value, rtol=1e-5, atol=1e-6)
    for name in ("loss", "policy_loss", "value_loss", "entropy", "explained_variance"):
        mean = (rank0["metrics"][name] + rank1["metrics"][name]) / 2
        if name == "explained_variance":  # already global on every rank
            mean = rank0["metrics"][name]
        assert mean == pytest.approx(float(metrics[name]), rel=1e-4, abs=1e-6), name


def test_the_shipped_cpu_config_trains_with_masked_runners(tmp_path):
    """``tag_cpu`` (torch backend, own state, egocentric, no bootstrap at the time limit)
    runs an iteration; its runners log the share of live rows."""
    from gpu_vecenv.train.config_loading import load_config
    from gpu_vecenv.train.trainer import Trainer

    config = load_config("tag_cpu", [], total_steps=16 * 10 * 32, device="cpu",
                         progress=False, tensorboard=False, eval_episodes=0,
                         run_dir=str(tmp_path / "run"))
    assert not config.policy_config("runner").bootstrap_truncated
    row = Trainer(config).run().metrics[-1]
    assert 0.0 < row["runner/live_fraction"] <= 1.0 and row["tagger/live_fraction"] == 1.0
