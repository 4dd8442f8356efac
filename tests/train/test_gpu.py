"""The trainer on a CUDA device (``-m gpu``; skipped without a CUDA GPU).

Roll-out and update must not synchronize the host with the GPU:
``torch.cuda.set_sync_debug_mode("error")`` turns any synchronizing call (``.item()``,
``.cpu()``, blocking copies, ``nonzero``) into an error while they run.
"""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv.train import evaluate
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.trainer import Trainer

pytestmark = pytest.mark.gpu

COMMON = {"device": "cuda", "progress": False, "tensorboard": False, "eval_episodes": 0,
          "checkpoint_interval": 0}


@pytest.mark.parametrize(
    "overrides, trainer",
    [
        (["ppo.num_steps=16"], {"env": "GPUCartPole-v1", "num_envs": 2048}),
        (["ppo.num_steps=16", "trainer.fused_kernels=false"],
         {"env": "GPUCartPole-v1", "num_envs": 2048}),
        (["ppo.num_steps=8", "ppo.normalize_obs=true"],
         {"env": "GPUMountainCarContinuous-v0", "num_envs": 256}),
        (["trainer.algo=a2c"], {"env": "GPUAcrobot-v1", "num_envs": 256}),
        (["trainer.algo=ddpg", "ddpg.learning_starts=0", "ddpg.batch_size=64",
          "ddpg.noise=ou", "ddpg.gradient_steps=2"], {"env": "GPUPendulum-v1", "num_envs": 64}),
        (["ppo.num_steps=8"], {"env": "GPUTag-v0", "num_envs": 16}),
    ],
    ids=["ppo-cartpole", "ppo-cartpole-torch-ops", "ppo-box", "a2c", "ddpg", "ppo-tag"],
)
def test_rollout_and_update_do_not_sync(tmp_path, overrides, trainer):
    t = Trainer(load_config(None, overrides, run_dir=str(tmp_path), **{**COMMON, **trainer}))
    t._collect()  # warm-up: lazy CUDA, cuBLAS and kernel initialisation may sync once
    t._update()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            t._collect()
            t._update()
            t.global_step += t.batch
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_ppo_solves_cartpole_on_the_gpu(tmp_path):
    config = load_config(None, ["ppo.num_steps=16", "ppo.learning_rate=0.0025"],
                         env="GPUCartPole-v1", num_envs=2048, total_steps=20_000_000, seed=1,
                         run_dir=str(tmp_path), log_interval=1, **COMMON)
    evaluations = []

    def check(row):
        if row.get("episode_return", 0.0) < 475.0:
            return True
        result = evaluate(config, trainer.groups, 100, trainer.device)
        evaluations.append(result["mean_return"])
        return result["mean_return"] < 475.0

    trainer = Trainer(config, callback=check)
    trainer.run()
    assert evaluations and evaluations[-1] >= 475.0, evaluations


LOSS_KEYS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "episode_return",
             "learning_rate")


def _rows(tmp_path, name, overrides, trainer, graphs):
    config = load_config(None, [*overrides, f"trainer.cuda_graphs={graphs}"],
                         run_dir=str(tmp_path / name), log_interval=1, seed=3,
                         **{**COMMON, **trainer})
    t = Trainer(config)
    assert (t.graphs is not None) == graphs
    return t, t.run().metrics


@pytest.mark.parametrize(
    "overrides, trainer",
    [
        (["ppo.num_steps=16"], {"env": "GPUCartPole-v1", "num_envs": 512,
                                "total_steps": 512 * 16 * 6}),
        (["ppo.num_steps=16", "trainer.fused_kernels=false"],
         {"env": "GPUCartPole-v1", "num_envs": 512, "total_steps": 512 * 16 * 6}),
        (["ppo.num_steps=8", "ppo.normalize_obs=true"],
         {"env": "GPUMountainCarContinuous-v0", "num_envs": 256, "total_steps": 256 * 8 * 5}),
        (["trainer.algo=a2c"], {"env": "GPUAcrobot-v1", "num_envs": 256,
                                "total_steps": 256 * 5 * 6}),
        (["ppo.num_steps=8", "trainer.fused_kernels=false"],
         {"env": "GPUTag-v0", "num_envs": 16, "total_steps": 16 * 11 * 8 * 5}),
    ],
    ids=["ppo-cartpole", "ppo-cartpole-torch-ops", "ppo-box", "a2c", "ppo-tag-torch-ops"],
)
def test_graphed_training_equals_eager_training(tmp_path, overrides, trainer):
    """Same seed, CUDA graphs on and off: every logged loss and return is identical, and
    so are the final weights (the graphs replay the eager kernels on the same tensors)."""
    eager, eager_rows = _rows(tmp_path, "eager", overrides, trainer, False)
    graphed, graphed_rows = _rows(tmp_path, "graphed", overrides, trainer, True)
    assert graphed.graphs.captured and len(graphed_rows) == len(eager_rows) >= 4
    for a, b in zip(eager_rows, graphed_rows, strict=True):
        keys = [k for k in a if k.split("/")[-1] in LOSS_KEYS]
        assert keys
        assert {k: a[k] for k in keys} == {k: b[k] for k in keys}, a["iteration"]
    for g_eager, g_graphed in zip(eager.groups, graphed.groups, strict=True):
        for (name, p), q in zip(g_eager.learner.model.state_dict().items(),
                                g_graphed.learner.model.state_dict().values(), strict=True):
            assert torch.equal(p, q), name


@pytest.mark.usefixtures("hard_time_limit")
def test_minibatch_orders_drawn_ahead_train_as_orders_drawn_per_epoch(tmp_path):
    """The fused learner draws every epoch's permutation at the start of the update, on a
    side stream; with target_kl (an early stop possible) it draws each at its epoch, as
    the torch path does. A target_kl that never stops: the same run, bit for bit."""
    trainer = {"env": "GPUCartPole-v1", "num_envs": 512, "total_steps": 512 * 16 * 5}
    ahead, ahead_rows = _rows(tmp_path, "ahead", ["ppo.num_steps=16"], trainer, False)
    per_epoch, per_epoch_rows = _rows(tmp_path, "per_epoch",
                                      ["ppo.num_steps=16", "ppo.target_kl=1e9"], trainer, False)
    assert ahead.groups[0].learner.fused is not None and len(ahead_rows) >= 4
    for a, b in zip(ahead_rows, per_epoch_rows, strict=True):
        keys = [k for k in a if k.split("/")[-1] in LOSS_KEYS]
        assert {k: a[k] for k in keys} == {k: b[k] for k in keys}, a["iteration"]
    for p, q in zip(ahead.groups[0].learner.model.parameters(),
                    per_epoch.groups[0].learner.model.parameters(), strict=True):
        assert torch.equal(p, q)


@pytest.mark.usefixtures("hard_time_limit")
def test_large_minibatches_run_on_tiles_of_128(tmp_path):
    """Minibatches with two tiles of 128 per multiprocessor take them where they fit in
    shared memory; one row fewer keeps tiles of 64."""
    from gpu_vecenv.train.ppo_mlp_kernels import shared_bytes, shared_limit

    device = torch.device("cuda")
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    envs = 2 * 128 * sms * 4 // 16  # 16 steps, 4 minibatches
    tiles = []
    for n in (envs, envs - 1):
        config = load_config(None, ["ppo.num_steps=16", "trainer.fused_kernels=true"],
                             env="GPUCartPole-v1", num_envs=n, run_dir=str(tmp_path / str(n)),
                             **COMMON)
        with Trainer(config) as t:
            tiles.append(t.groups[0].learner.fused.tile)
    learner = t.groups[0].learner
    fits = shared_bytes(4, (64, 64), learner.spec, 128) <= shared_limit(device)
    assert tiles == [128 if fits else 64, 64]


def test_graphs_required_but_impossible_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="target_kl"):
        Trainer(load_config(None, ["ppo.target_kl=0.02", "trainer.cuda_graphs=true"],
                            env="GPUCartPole-v1", num_envs=64, run_dir=str(tmp_path),
                            **COMMON))
    with pytest.raises(ValueError, match="torch backend"):
        Trainer(load_config(None, ["trainer.cuda_graphs=true"], env="GPUCartPole-v1",
                            backend="torch", num_envs=64, run_dir=str(tmp_path), **COMMON))


@pytest.mark.usefixtures("hard_time_limit")
@pytest.mark.parametrize("env", ["GPUPendulum-v1", "GPUCartPole-v1"])
@pytest.mark.parametrize("fused", ["true", "false"])
def test_a_diverged_policy_stops_the_run_as_diverged(tmp_path, env, fused):
    """On a GPU the env only counts invalid actions (no per-step sync); the run must still
    stop in its first iteration, and say that training diverged (NaN weights), not only
    that the env got invalid actions: the env raises once the flag reaches the host, or
    the trainer's check at the log read does. NaN logits sample an invalid action (-1).
    Which comes first is a race (the flag's copy against the host reaching the update):
    before the update only the poisoned bias is NaN; at the log read the update has spread
    it and the loss is NaN."""
    from gpu_vecenv.actions import InvalidActionError
    from gpu_vecenv.train.divergence import TrainingDiverged

    config = load_config(None, ["ppo.num_steps=8", f"trainer.fused_kernels={fused}"],
                         env=env, num_envs=64, total_steps=64 * 8 * 4, run_dir=str(tmp_path),
                         log_interval=1, **COMMON)
    trainer = Trainer(config)
    with torch.no_grad():
        trainer.groups[0].learner.model.actor[-1].bias.fill_(float("nan"))
    with pytest.raises(TrainingDiverged, match="training diverged at step ") as info:
        trainer.run()
    message = str(info.value)
    if isinstance(info.value.__cause__, InvalidActionError):  # the env's flag first
        assert "weights not finite: actor.4.bias; what failed next: InvalidActionError" \
            in message, message
    else:  # the check at the log read, after the first update
        assert info.value.__cause__ is None
        assert "policy 'default': loss nan; weights not finite: actor." in message, message
    assert trainer.iteration <= 1


def test_fused_kernels_true_explains_what_blocks_them(tmp_path):
    with pytest.raises(ValueError, match="fused_kernels=true.*PPO's update, not a2c's"):
        Trainer(load_config(None, ["trainer.algo=a2c", "trainer.fused_kernels=true"],
                            env="GPUCartPole-v1", num_envs=8, run_dir=str(tmp_path), **COMMON))
    config = load_config(None, ["trainer.fused_kernels=true"], env="GPUCartPole-v1",
                         num_envs=8, run_dir=str(tmp_path / "ok"), **COMMON)
    assert Trainer(config).groups[0].learner.fused is not None
    with pytest.raises(ValueError, match="fused_kernels=true.*do not mask the idle slots"):
        Trainer(load_config(None, ["trainer.fused_kernels=true"], env="GPUTag-v0",
                            num_envs=2, run_dir=str(tmp_path / "tag"), **COMMON))


@pytest.mark.usefixtures("hard_time_limit")  # builds (compiles) a kernel per precision
@pytest.mark.parametrize("precision, mma", [("highest", 3), ("high", 1)])
def test_the_fused_kernels_run_the_configs_matmul_precision(tmp_path, precision, mma):
    config = load_config(None, ["trainer.fused_kernels=true",
                                f"trainer.matmul_precision={precision}"],
                         env="GPUCartPole-v1", num_envs=8, run_dir=str(tmp_path), **COMMON)
    with Trainer(config) as t:
        cores = torch.cuda.get_device_capability() >= (8, 0)  # TF32 tensor cores
        assert t.groups[0].learner.fused.mma_precision == (mma if cores else 0)


@pytest.mark.usefixtures("hard_time_limit")
@pytest.mark.parametrize(
    "overrides, trainer",
    [
        (["ppo.num_steps=16", "trainer.fused_kernels=false"],
         {"env": "GPUCartPole-v1", "num_envs": 512, "total_steps": 512 * 16 * 6}),
        (["trainer.algo=a2c"], {"env": "GPUAcrobot-v1", "num_envs": 256,
                                "total_steps": 256 * 5 * 6}),
        (["ppo.num_steps=8", "ppo.hidden_sizes=[256,256]", "ppo.activation=relu"],
         {"env": "GPUTag-v0", "num_envs": 16, "total_steps": 16 * 11 * 8 * 5}),
    ],
    ids=["ppo-cartpole-torch-ops", "a2c", "ppo-tag-256x256"],
)
def test_a_compiled_update_is_captured_and_trains_as_the_eager_one(tmp_path, overrides,
                                                                  trainer):
    """trainer.compile_update: compiled in the warm-up, then captured with the rest; the
    logged losses stay those of the eager loss (other summation orders: close, not equal)."""
    _, eager_rows = _rows(tmp_path, "eager", overrides, trainer, True)
    compiled, compiled_rows = _rows(tmp_path, "compiled",
                                    [*overrides, "trainer.compile_update=true"], trainer, True)
    assert compiled.graphs.captured and len(compiled_rows) == len(eager_rows) >= 4
    for a, b in zip(eager_rows, compiled_rows, strict=True):
        for k in (k for k in a if k.split("/")[-1] in ("loss", "entropy", "value_loss")):
            assert b[k] == pytest.approx(a[k], rel=1e-3, abs=1e-4), (a["iteration"], k)


@pytest.mark.usefixtures("hard_time_limit")
@pytest.mark.parametrize("config_name, kwargs", [
    ("pendulum_ddpg", {}),  # Box: the clamped most likely action, 200-step episodes
    ("tag_ppo", {"stochastic": True, "entropy": True}),  # sampled, from a Generator
    ("tag_ppo", {"random_policy": "runner"}),  # uniform random runners
], ids=["box", "tag-sampled", "tag-random-runners"])
def test_a_captured_evaluation_plays_what_the_eager_one_plays(tmp_path, monkeypatch,
                                                              config_name, kwargs):
    """The evaluation replays its steps as CUDA graphs (the stop check's 100 episodes):
    the same actions, returns, lengths and entropy sums as the eager loop, bit for bit."""
    from gpu_vecenv.captured_rollout import CapturedRollout
    from gpu_vecenv.train.evaluation import build_models, play_episodes
    from gpu_vecenv.train.training_env import make_env

    device = torch.device("cuda")
    config = load_config(config_name, [], run_dir=str(tmp_path), **COMMON)
    torch.manual_seed(0)
    models = build_models(config, make_env(config, device, num_envs=1), device)
    captures = []
    capture = CapturedRollout._capture
    monkeypatch.setattr(CapturedRollout, "_capture",
                        lambda self: (captures.append(self.num_steps), capture(self))[1])
    eager = play_episodes(config, models, 8, device, seed=3, capture=False, **kwargs)
    assert captures == []
    graphed = play_episodes(config, models, 8, device, seed=3, **kwargs)
    assert captures == [32]
    assert eager.lengths.max() > 64  # replays, not only the eager first chunk
    for name in ("returns", "lengths", "terminated"):
        assert torch.equal(getattr(graphed, name), getattr(eager, name)), name
    assert graphed.entropy == eager.entropy
    assert bool(graphed.entropy) == ("entropy" in kwargs)
