"""``scripts/bench_vs_warpdrive_trainer.py`` without a GPU: WarpDrive's Tag observation read
from ours, its ``FullyConnected`` rebuilt and acting in our env, our A2C / PPO configs
derived from its ``tag_continuous.yaml``, its training loop's stop, the arguments.

The training itself runs only where WarpDrive, PyCUDA and a GPU are. Tests that compare
with WarpDrive's own code (its CPU ``TagContinuous``, its ``FullyConnected`` class, its
installed yaml) skip where WarpDrive and its ``gym`` do not import (CI); with the wheels
of .device-kit/peers installed into a folder on ``PYTHONPATH`` they run on a CPU.
"""

from __future__ import annotations

import importlib.util
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from benchmarks import warpdrive_trainer_config as wdc
from benchmarks import warpdrive_trainer_peer as peer
from benchmarks.warpdrive_policy import (
    WarpDriveFullyConnected,
    WarpDrivePolicy,
    observation_mapping_problem,
    warpdrive_obs_dim,
    warpdrive_observation,
    warpdrive_policies,
)
from gpu_vecenv.envs import tag
from gpu_vecenv.envs.tag import TagParams
from gpu_vecenv.train.config_loading import config_from_dict, load_yaml
from gpu_vecenv.train.distributions import ActionSpec
from gpu_vecenv.train.shipped_configs import resolve_config_path
from tests.script_modules import load_script


def _warpdrive_cpu_problem() -> str | None:
    """Why WarpDrive's pure-Python parts (CPU env, models, yaml) cannot be imported here."""
    for module in ("gym", "warp_drive", "example_envs"):
        if importlib.util.find_spec(module) is None:
            return (f"{module} is not installed (WarpDrive 2.7.1 and gym 0.26 from "
                    ".device-kit/peers on PYTHONPATH run these comparisons on a CPU)")
    return None


needs_warpdrive = pytest.mark.skipif(_warpdrive_cpu_problem() is not None,
                                     reason=str(_warpdrive_cpu_problem()))


@pytest.fixture(scope="module")
def script():
    return load_script("bench_vs_warpdrive_trainer")


def _start(params: TagParams, seed: int) -> dict[str, torch.Tensor]:
    u = torch.rand((1, params.num_agents, 3), generator=torch.Generator().manual_seed(seed))
    return tag.reset(params, u)


def _spec(params: TagParams) -> ActionSpec:
    return ActionSpec.from_space(tag.action_space(params))


# -- the observation mapping --------------------------------------------------------------

def test_warpdrive_observation_is_our_block_before_the_own_extras():
    params = TagParams.warpdrive_training(observe_own_state=True)  # own role on by default
    obs = tag.observe(params, _start(params, 0))[0]  # (110, 77)
    assert warpdrive_obs_dim(params) == 7 * 10 + 1 == 71
    assert obs.shape == (110, 71 + 5 + 1)
    mapped = warpdrive_observation(obs, params)
    assert torch.equal(mapped, obs[:, :71])
    plain = TagParams.warpdrive_training(observe_own_role=False)
    plain_obs = tag.observe(plain, _start(plain, 0))[0]
    assert torch.equal(mapped, plain_obs)  # the extras came after WarpDrive's block
    assert torch.equal(warpdrive_observation(plain_obs, plain), plain_obs)
    assert torch.equal(obs[:, -1], (torch.arange(110) < 10).float())  # own role dropped


def test_full_observation_maps_too_and_egocentric_does_not():
    full = TagParams(num_taggers=2, num_runners=3)  # defaults: full mode, own role
    obs = tag.observe(full, _start(full, 1))[0]
    assert warpdrive_obs_dim(full) == 7 * 4 + 1
    assert torch.equal(warpdrive_observation(obs, full), obs[:, :29])
    ego = TagParams.warpdrive_training(egocentric=True)
    assert "egocentric" in observation_mapping_problem(ego)
    with pytest.raises(ValueError, match="egocentric"):
        warpdrive_observation(torch.zeros(3, ego.obs_dim), ego)
    with pytest.raises(ValueError, match="72"):
        warpdrive_observation(torch.zeros(3, 71), TagParams.warpdrive_training())


def _warpdrive_cpu_env(params: TagParams, state: dict[str, torch.Tensor], seed: int):
    """WarpDrive's CPU ``TagContinuous`` of ``params`` starting where ``state`` does; its
    taggers are random ids, so our tagger k sits at its k-th tagger id (``ours[i]`` is
    its id of our agent i)."""
    from example_envs.tag_continuous.tag_continuous import TagContinuous

    from benchmarks.warpdrive_peer import warpdrive_env_kwargs

    kwargs = dict(warpdrive_env_kwargs(params, seed), env_backend="cpu")
    probe = TagContinuous(**kwargs)
    ours = sorted(probe.taggers) + sorted(probe.runners)
    x, y, d = (np.empty(params.num_agents, np.float32) for _ in range(3))
    for i, wd in enumerate(ours):
        x[wd], y[wd] = float(state["x"][0, i]), float(state["y"][0, i])
        d[wd] = float(state["direction"][0, i])
    env = TagContinuous(**kwargs, starting_location_x=x, starting_location_y=y,
                        starting_directions=d)
    assert sorted(env.taggers) == sorted(probe.taggers)  # the same seed, the same ids
    return env, ours


@needs_warpdrive
def test_our_observation_read_as_warpdrives_equals_its_cpu_env():
    """At reset and over steps without a tag (where the two envs' rules agree), WarpDrive's
    observation of each agent is our mapped one."""
    params = TagParams.warpdrive_training(num_taggers=3, num_runners=12, grid_length=4.0,
                                          num_other_agents_observed=5)
    state = _start(params, 7)
    env, ours = _warpdrive_cpu_env(params, state, seed=11)
    wd_obs = env.reset()
    rng = np.random.default_rng(3)
    for t in range(4):
        mapped = warpdrive_observation(tag.observe(params, state)[0], params).numpy()
        theirs = np.stack([wd_obs[wd] for wd in ours])
        np.testing.assert_allclose(mapped, theirs, atol=2e-6, err_msg=f"step {t}")
        actions = rng.integers(0, 21, size=(params.num_agents, 2))
        state = tag.step(params, state, torch.as_tensor(actions)[None]).state
        wd_obs, _, _, _ = env.step({wd: actions[i] for i, wd in enumerate(ours)})
        assert bool((state["in_game"] == 1).all()), "a tag: pick a seed without one"


# -- WarpDrive's network, rebuilt ---------------------------------------------------------

def _warpdrive_state_dict(obs_dim=71, fc=(256, 256), nvec=(21, 21), seed=0):
    """A state dict under WarpDrive's FullyConnected names, made without it."""
    g = torch.Generator().manual_seed(seed)
    sizes, sd = [obs_dim, *fc], {}
    for i, (a, b) in enumerate(zip(sizes, sizes[1:], strict=False)):
        sd[f"fc.{i}.0.weight"] = torch.randn(b, a, generator=g) / math.sqrt(a)
        sd[f"fc.{i}.0.bias"] = torch.randn(b, generator=g) * 0.1
    for d, n in enumerate(nvec):
        sd[f"policy_head.{d}.weight"] = torch.randn(n, fc[-1], generator=g) / math.sqrt(fc[-1])
        sd[f"policy_head.{d}.bias"] = torch.randn(n, generator=g) * 0.1
    sd["vf_head.weight"] = torch.randn(1, fc[-1], generator=g) / math.sqrt(fc[-1])
    sd["vf_head.bias"] = torch.randn(1, generator=g)
    return sd


def test_rebuilt_network_computes_warpdrives_forward_from_its_state_dict():
    sd = _warpdrive_state_dict()
    net = WarpDriveFullyConnected.from_state_dict(sd)
    obs = torch.randn(5, 71, generator=torch.Generator().manual_seed(1))
    h = obs
    for i in range(2):  # fully_connected.py: each fc layer is Linear then ReLU
        h = torch.relu(h @ sd[f"fc.{i}.0.weight"].T + sd[f"fc.{i}.0.bias"])
    probs, values = net(obs)
    for d in range(2):
        expected = torch.softmax(h @ sd[f"policy_head.{d}.weight"].T
                                 + sd[f"policy_head.{d}.bias"], dim=-1)
        torch.testing.assert_close(probs[d], expected)
    torch.testing.assert_close(values, (h @ sd["vf_head.weight"].T + sd["vf_head.bias"])[:, 0])
    with pytest.raises(ValueError, match="not a WarpDrive"):
        WarpDriveFullyConnected.from_state_dict({"actor.0.weight": torch.zeros(2, 2)})


@needs_warpdrive
def test_rebuilt_network_equals_warpdrives_fully_connected_class():
    from gym.spaces import Box, MultiDiscrete
    from warp_drive.training.models.fully_connected import FullyConnected

    agents = list(range(4))
    stub = SimpleNamespace(  # what its constructor reads of the env wrapper
        env=SimpleNamespace(observation_space={a: Box(-1, 1, (71,)) for a in agents},
                            action_space={a: MultiDiscrete((21, 21)) for a in agents}),
        cuda_data_manager=SimpleNamespace(get_shape=lambda name: (250, 100, 4, 71)),
        n_agents=4)
    torch.manual_seed(0)
    theirs = FullyConnected(stub, {"fc_dims": [256, 256]}, "tagger", {"tagger": agents})
    ours = WarpDriveFullyConnected.from_state_dict(theirs.state_dict())
    obs = torch.randn(3, 4, 71)
    their_probs, their_values = theirs(obs)
    our_probs, our_values = ours(obs)
    for a, b in zip(their_probs, our_probs, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(their_values, our_values)


def test_policy_acts_as_our_actor_critic_does():
    params = TagParams.warpdrive_training()  # our obs has the own role: dropped
    policy = WarpDrivePolicy(WarpDriveFullyConnected.from_state_dict(_warpdrive_state_dict()),
                             params, _spec(params))
    obs = tag.observe(params, _start(params, 2))[0]
    probs, values = policy.network(obs[:, :71])
    action = policy.deterministic_action(obs)
    assert action.shape == (110, 2) and action.dtype == torch.int64
    assert torch.equal(action, torch.stack([p.argmax(-1) for p in probs], dim=-1))
    sampled, log_prob = policy.act(obs, torch.Generator().manual_seed(0))
    log_prob2, entropy, value = policy.evaluate(obs, sampled)
    torch.testing.assert_close(log_prob, log_prob2)
    expected = sum(torch.log(p.gather(-1, sampled[:, d:d + 1]))[:, 0]
                   for d, p in enumerate(probs))
    torch.testing.assert_close(log_prob, expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(entropy, sum(-(p * p.log()).sum(-1) for p in probs),
                               rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(value, values)
    torch.testing.assert_close(policy.value(obs), values)


def test_policy_refuses_a_network_of_another_game():
    net = WarpDriveFullyConnected.from_state_dict(_warpdrive_state_dict(obs_dim=29))
    params = TagParams.warpdrive_training()
    with pytest.raises(ValueError, match="reads 29 floats"):
        WarpDrivePolicy(net, params, _spec(params))
    small = TagParams(num_acceleration_levels=5)
    with pytest.raises(ValueError, match="heads"):
        WarpDrivePolicy(WarpDriveFullyConnected.from_state_dict(_warpdrive_state_dict()),
                        small, _spec(small))


@pytest.fixture
def one_thread():
    """Tiny networks on a shared 2-core machine: a second torch thread only contends."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_warpdrive_policies_play_the_2x2_in_our_env(one_thread):
    """The models versus_random takes: WarpDrive networks for tagger and runner, in a
    small game of WarpDrive's layout on the CPU (torch backend)."""
    from gpu_vecenv.train.versus_random import versus_random

    kwargs = {"num_taggers": 2, "num_runners": 4, "episode_length": 6, "grid_length": 3.0,
              "use_full_observation": False, "num_other_agents_observed": 3,
              "observe_own_role": False}
    params = TagParams(**kwargs)
    config = config_from_dict({
        "trainer": {"env": "GPUTag-v0", "algo": "a2c", "num_envs": 2, "device": "cpu",
                    "backend": "torch", "env_kwargs": kwargs},
        "policies": {"tagger": {"agents": ["tagger"]}, "runner": {"agents": ["runner"]}}})
    state_dicts = {name: _warpdrive_state_dict(obs_dim=22, fc=(8, 8), nvec=(11, 11), seed=s)
                   for s, name in enumerate(("tagger", "runner"))}
    models = warpdrive_policies(state_dicts, params, _spec(params))
    result = versus_random(config, models, 2, torch.device("cpu"), seed=5, stochastic=True)
    assert [(p["taggers"], p["runners"]) for p in result["pairings"]] == [
        ("trained", "trained"), ("trained", "random"), ("random", "trained"),
        ("random", "random")]
    assert set(result["entropy"]) == {"tagger", "runner"}
    for p in result["pairings"]:
        assert 0 <= p["runners_tagged_per_game"] <= 4
        assert p["runners_tagged_per_game"] + p["runners_escaping_per_game"] == 4


# -- our configs from WarpDrive's yaml ----------------------------------------------------

def test_our_a2c_config_is_warpdrives_batch_game_and_coefficients():
    wd = wdc.WARPDRIVE_TAG_CONTINUOUS
    config = config_from_dict(wdc.our_a2c_config(wd, seed=3))
    t = config.trainer
    params = TagParams(**t.env_kwargs)
    assert (t.algo, t.num_envs, t.seed) == ("a2c", 100, 3)
    assert (params.num_taggers, params.num_runners, params.num_agents) == (10, 100, 110)
    assert params == TagParams.warpdrive_training(observe_own_role=False,
                                                  fixed_start_positions=True)
    assert config.a2c.num_steps * t.num_envs == wd["trainer"]["train_batch_size"] == 25_000
    assert wdc.agent_steps_per_iteration(wd) == 25_000 * 110 == \
        config.a2c.num_steps * t.num_envs * params.num_agents
    assert warpdrive_obs_dim(params) == params.obs_dim == 71  # its observation, unmapped
    for name, lr in (("tagger", 0.001), ("runner", 0.005)):
        c = config.policy_config(name)
        assert config.policies[name].agents == [name]
        assert (c.learning_rate, c.gamma, c.ent_coef, c.max_grad_norm) == (lr, 0.98, 0.05, 0.5)
        assert c.vf_coef == 2.0  # ours 0.5 * MSE, WarpDrive's 1 * MSE
        assert (c.hidden_sizes, c.activation, c.optimizer) == ((256, 256), "relu", "adam")
        assert (c.gae_lambda, c.norm_adv, c.anneal_lr, c.bootstrap_truncated) == \
            (1.0, False, False, False)
    fresh = config_from_dict(wdc.our_a2c_config(wd, fixed_starts=False))
    assert fresh.trainer.env_kwargs["fixed_start_positions"] is False


def test_our_ppo_config_is_shipped_tag_ppo_on_the_same_game():
    wd = wdc.WARPDRIVE_TAG_CONTINUOUS
    ppo = config_from_dict(wdc.our_ppo_config(wd))
    a2c = config_from_dict(wdc.our_a2c_config(wd))
    shipped = config_from_dict(load_yaml(resolve_config_path("tag_ppo")))
    assert ppo.ppo == shipped.ppo and ppo.policies == shipped.policies
    assert ppo.trainer.env_kwargs == a2c.trainer.env_kwargs
    assert (ppo.trainer.algo, ppo.trainer.num_envs) == ("ppo", 100)


def test_a_yaml_that_does_not_map_is_refused():
    wd = wdc.WARPDRIVE_TAG_CONTINUOUS
    odd = {**wd, "trainer": {**wd["trainer"], "train_batch_size": 25_001}}
    with pytest.raises(ValueError, match="multiple"):
        wdc.our_a2c_config(odd)
    unknown = {**wd, "env": {**wd["env"], "wind_speed": 3.0}}
    with pytest.raises(ValueError, match="wind_speed"):
        wdc.our_a2c_config(unknown)


@needs_warpdrive
def test_our_copy_of_tag_continuous_yaml_is_the_installed_one():
    assert peer.load_warpdrive_run_config() == wdc.WARPDRIVE_TAG_CONTINUOUS


# -- WarpDrive's loop and its fixes -------------------------------------------------------

def test_run_config_gets_an_int_seed_and_enough_iterations(tmp_path):
    wd = wdc.WARPDRIVE_TAG_CONTINUOUS
    out = peer.prepare_run_config(wd, seed=np.int32(7), iterations=3, results_dir=str(tmp_path))
    assert type(out["trainer"]["seed"]) is int and out["trainer"]["seed"] == 7
    t = out["trainer"]
    # TrainerBase: num_iters = episode_length * num_episodes // train_batch_size
    assert out["env"]["episode_length"] * t["num_episodes"] // t["train_batch_size"] == 3
    timed = peer.prepare_run_config(wd, seed=1, iterations=None, results_dir=str(tmp_path))
    assert 500 * timed["trainer"]["num_episodes"] // 25_000 == 10**6
    assert out["saving"]["basedir"] == str(tmp_path)
    assert wd["trainer"]["num_episodes"] == 500 and "seed" not in wd["trainer"]  # a copy


class _FakeTrainer:
    """What ``train_for`` touches of WarpDrive's ``TrainerA2C``."""

    def __init__(self, rollout_seconds: float = 0.0):
        self.rollout_seconds = rollout_seconds
        self.cuda_envs = SimpleNamespace(resets=0)
        self.cuda_envs.reset_all_envs = lambda: setattr(self.cuda_envs, "resets",
                                                        self.cuda_envs.resets + 1)
        self.num_iters, self.training_batch_size = 1000, 25_000
        self.perf_stats = SimpleNamespace(iters=0, steps=0, total_time=0.0)
        self.calls: list[str] = []

    def _generate_rollout_batch(self):
        import time

        time.sleep(self.rollout_seconds)
        self.calls.append("rollout")
        return {}

    def _update_model_params(self, iteration):
        self.calls.append(f"update {iteration}")
        return {}

    def _log_metrics(self, metrics, sample_params):
        self.calls.append("log")

    def save_model_checkpoint(self, iteration):
        self.calls.append("save")


def test_train_for_runs_its_loop_for_n_iterations():
    trainer = _FakeTrainer()
    times = peer.train_for(trainer, None, 3)
    assert len(times) == 3 and trainer.cuda_envs.resets == 1
    assert trainer.calls[:4] == ["rollout", "update 0", "log", "save"]
    assert trainer.calls.count("update 2") == 1 and "update 3" not in trainer.calls
    assert (trainer.perf_stats.iters, trainer.perf_stats.steps) == (3, 75_000)
    assert trainer.perf_stats.total_time == pytest.approx(sum(times))


def test_train_for_stops_once_its_training_time_reaches_the_budget():
    trainer = _FakeTrainer(rollout_seconds=0.02)
    times = peer.train_for(trainer, 0.05, None)
    assert trainer.perf_stats.total_time >= 0.05
    assert sum(times[:-1]) < 0.05  # it stopped at the first iteration past the budget
    with pytest.raises(ValueError):
        peer.train_for(_FakeTrainer(), None, None)


def test_perf_summary_counts_agent_steps():
    stats = SimpleNamespace(iters=3, steps=75_000, policy_eval_time=0.1,
                            action_sample_time=0.1, env_step_time=0.3, training_time=0.2,
                            total_time=1.5)
    out = peer.perf_summary(stats, 110, [0.9, 0.3, 0.3])
    assert out["agent_steps"] == 75_000 * 110
    assert out["agent_steps_per_s"] == pytest.approx(75_000 * 110 / 1.5)
    assert out["agent_steps_per_s_after_first"] == pytest.approx(2 * 25_000 * 110 / 0.6)


# -- the script ---------------------------------------------------------------------------

def test_arguments(script):
    args = script.parse_args(["out.json", "--seconds", "60"])
    assert (args.seconds, args.iterations) == (60.0, None)
    assert args.trainers == ["ours_a2c", "ours_ppo", "warpdrive"]
    assert (args.starts, args.eval_starts, args.eval_games) == ("fixed", "fresh", 100)
    args = script.parse_args(["o.json", "--iterations", "5", "--trainers", "warpdrive,ours_a2c",
                              "--starts", "fresh"])
    assert (args.iterations, args.trainers, args.starts) == (5, ["warpdrive", "ours_a2c"],
                                                             "fresh")
    for bad in (["o.json"], ["o.json", "--seconds", "1", "--iterations", "2"],
                ["o.json", "--seconds", "0"], ["o.json", "--iterations", "1",
                                               "--trainers", "rllib"]):
        with pytest.raises(SystemExit):
            script.parse_args(bad)


def test_our_trainers_take_the_overrides(script, tmp_path):
    args = script.parse_args(["o.json", "--iterations", "1", "--device", "cpu",
                              "--set", "a2c.learning_rate=0.001",
                              "--set", "trainer.matmul_precision=high"])
    raw = {"trainer": {"env": "GPUCartPole-v1", "algo": "a2c", "num_envs": 4,
                       "progress": False, "tensorboard": False, "eval_episodes": 0,
                       "checkpoint_interval": 0, "backend": "torch"},
           "a2c": {"hidden_sizes": [8]}}
    record, config, models = script.run_ours(raw, args, total_steps=4 * 5 * 2)
    assert config.a2c.learning_rate == 0.001 and config.trainer.matmul_precision == "high"
    assert record["throughput"]["iterations"] == 2 and set(models) == {"default"}


def test_cross_play_mixes_the_teams_and_reads_the_trained_cell(script, monkeypatch):
    played = []

    def fake_two_by_two(config, models, args):
        played.append((models["tagger"], models["runner"]))
        cell = {"taggers": "trained", "runners": "trained", "runners_tagged_per_game": 1.0,
                "mean_steps_to_tag": None, "who": f"{models['tagger']}+{models['runner']}"}
        other = dict(cell, taggers="random", who="wrong cell")
        return {mode: {"pairings": [other, cell]} for mode in ("most_likely", "sampled")}

    monkeypatch.setattr(script, "two_by_two", fake_two_by_two)
    ours, theirs = {"tagger": "T_ours", "runner": "R_ours"}, {"tagger": "T_wd", "runner": "R_wd"}
    result = script.cross_play(None, ours, theirs, None)
    assert played == [("T_ours", "R_wd"), ("T_wd", "R_ours")]
    assert result["our_taggers_vs_its_runners"]["sampled"]["who"] == "T_ours+R_wd"
    assert result["its_taggers_vs_our_runners"]["most_likely"]["who"] == "T_wd+R_ours"
    text = script.table({"trainers": {}, "cross_play": {"ours_ppo": result}})
    assert "ours_ppo_taggers_vs_warpdrive_runners: 1.00 / -, 1.00 / -" in text
    assert "warpdrive_taggers_vs_ours_ppo_runners" in text


def test_write_configs_gives_yaml_files_the_trainer_loads(script, tmp_path):
    from gpu_vecenv.train.config_loading import load_config

    assert script.main([str(tmp_path / "unused.json"), "--write-configs", str(tmp_path),
                        "--set", "trainer.matmul_precision=high"]) == 0
    a2c = load_config(str(tmp_path / "ours_a2c.yaml"), [])
    ppo = load_config(str(tmp_path / "ours_ppo.yaml"), [])
    assert (a2c.trainer.algo, ppo.trainer.algo) == ("a2c", "ppo")
    assert a2c.trainer.num_envs == ppo.trainer.num_envs == 100
    assert a2c.trainer.matmul_precision == ppo.trainer.matmul_precision == "high"
    assert not (tmp_path / "unused.json").exists()


def test_stop_callback_and_throughput(script):
    rows: list[dict] = []
    stop = script.stop_callback(10.0, rows)
    assert stop({"time": 4.0, "global_step": 100, "iteration": 1}) is True
    assert stop({"time": 10.5, "global_step": 300, "iteration": 3}) is False
    assert script.stop_callback(None, [])({"time": 1e9}) is True
    out = script.throughput(rows)
    assert out["agent_steps_per_s"] == pytest.approx(300 / 10.5)
    assert out["agent_steps_per_s_after_first"] == pytest.approx(200 / 6.5)
    assert (out["iterations"], out["agent_steps"]) == (3, 300)


def test_eval_config_changes_only_the_start_layouts(script):
    config = config_from_dict(wdc.our_a2c_config(wdc.WARPDRIVE_TAG_CONTINUOUS))
    fresh = script.eval_config(config, "fresh")
    assert fresh.trainer.env_kwargs == dict(config.trainer.env_kwargs,
                                            fixed_start_positions=False)
    assert config.trainer.env_kwargs["fixed_start_positions"] is True  # not changed
    assert fresh.policies == config.policies and fresh.a2c == config.a2c


def test_median_round_takes_the_middle_finished_round(script):
    rounds = [{"agent_steps_per_s": 3.0, "iterations": 30}, {"error": "boom"},
              {"agent_steps_per_s": 1.0, "iterations": 10},
              {"agent_steps_per_s": 2.0, "iterations": 20},
              {"agent_steps_per_s": 4.0, "iterations": 40}]
    median = script.median_round(rounds)
    assert (median["agent_steps_per_s"], median["iterations"]) == (2.0, 20)  # lower middle
    assert median["rounds"] == 4
    assert median["rounds_agent_steps_per_s"] == [3.0, None, 1.0, 2.0, 4.0]
    assert script.median_round(rounds[:3])["agent_steps_per_s"] == 1.0
    with pytest.raises(ValueError, match="no round finished"):
        script.median_round([{"error": "boom"}])
    with pytest.raises(SystemExit):
        script.parse_args(["o.json", "--seconds", "1", "--rounds", "0"])


def test_rounds_alternate_and_the_games_use_the_last_round(script, monkeypatch, tmp_path):
    """Every trainer trained once a round, in turn; each reports its median round and every
    round's rate; the 2x2 and the cross-play play the last round's policies."""
    trained, played = [], []
    rates = {"ours_a2c": iter([10.0, 30.0, 20.0]), "warpdrive": iter([2.0, 1.0, 3.0])}

    def fake_train_one(name, wd_config, args, fixed, total):
        trained.append(name)
        rate = next(rates[name])
        throughput = {"iterations": 1, "agent_steps": 1, "seconds": 1.0,
                      "agent_steps_per_s": rate}
        return {"throughput": throughput}, f"config of {name}", {"tagger": f"{name} {rate}",
                                                                 "runner": f"{name} {rate}"}

    def fake_two_by_two(config, models, args):
        played.append(models["tagger"])
        cell = {"taggers": "trained", "runners": "trained", "runners_tagged_per_game": 1.0,
                "mean_steps_to_tag": 5.0}
        return {mode: {"pairings": [cell]} for mode in ("most_likely", "sampled")}

    monkeypatch.setattr(script, "train_one", fake_train_one)
    monkeypatch.setattr(script, "two_by_two", fake_two_by_two)
    monkeypatch.setattr(script, "table", lambda results: "")
    out = tmp_path / "out.json"
    assert script.main([str(out), "--seconds", "1", "--rounds", "3", "--trainers",
                        "ours_a2c,warpdrive", "--device", "cpu"]) == 0
    assert trained == ["ours_a2c", "warpdrive"] * 3
    import json

    results = json.loads(out.read_text())
    a2c, wd = (results["trainers"][n]["throughput"] for n in ("ours_a2c", "warpdrive"))
    assert (a2c["agent_steps_per_s"], wd["agent_steps_per_s"]) == (20.0, 2.0)
    assert a2c["rounds_agent_steps_per_s"] == [10.0, 30.0, 20.0]
    # the 2x2 of each trainer, then the cross-play (ours against WarpDrive, both ways), all
    # with the last round's networks
    assert played == ["ours_a2c 20.0", "warpdrive 3.0", "ours_a2c 20.0", "warpdrive 3.0"]
