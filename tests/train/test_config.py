"""Config parsing, overrides, validation errors, shipped configs and --help."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from gpu_vecenv.env_ids import ENVS, SHIPPED_IDS
from gpu_vecenv.train import cli as train_cli
from gpu_vecenv.train.config import SECTIONS, A2CConfig, Config, PPOConfig
from gpu_vecenv.train.config_help import config_help, field_docs
from gpu_vecenv.train.config_loading import (
    apply_override,
    config_from_dict,
    load_config,
    load_yaml,
)
from gpu_vecenv.train.shipped_configs import (
    CONFIG_DIR,
    default_config_path,
    resolve_config_path,
    shipped_config_paths,
)


def test_defaults_and_yaml_with_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("trainer:\n  env: GPUCartPole-v1\n  num_envs: 8\nppo:\n  learning_rate: 3e-4\n")
    config = load_config(path, ["trainer.num_envs=32", "ppo.hidden_sizes=[32, 16]",
                                "ppo.target_kl=0.02", "ppo.anneal_lr=false"], seed=7)
    assert config.trainer.num_envs == 32 and config.trainer.seed == 7
    assert config.ppo.learning_rate == 3e-4  # "3e-4" is a YAML string: coerced to float
    assert config.ppo.hidden_sizes == (32, 16)
    assert config.ppo.target_kl == 0.02 and config.ppo.anneal_lr is False
    assert config.ppo.num_steps == PPOConfig().num_steps
    assert config.algo_config is config.ppo


def test_int_field_accepts_integral_float_text():
    config = load_config(None, ["trainer.total_steps=1e6"])
    assert config.trainer.total_steps == 1_000_000
    assert isinstance(config.trainer.total_steps, int)


def test_round_trip_through_dict():
    config = load_config(None, ["trainer.algo=a2c", "a2c.num_steps=7"])
    again = config_from_dict(config.to_dict())
    assert again == config


@pytest.mark.parametrize(
    "override, message",
    [
        ("ppo.learnin_rate=0.1", "ppo.learnin_rate"),
        ("trainer.num_envs=lots", "trainer.num_envs must be an int"),
        ("trainer.num_envs=2.5", "trainer.num_envs must be an int"),
        ("ppo.anneal_lr=maybe", "ppo.anneal_lr must be true or false"),
        ("trainer.algo=sac", "trainer.algo must be one of"),
        ("trainer.env=GPUCartPol-v1", "unknown env id 'GPUCartPol-v1'"),
        ("trainer.num_envs=0", "trainer.num_envs must be >= 1"),
        ("ppo.gamma=1.5", "gamma must be in [0, 1]"),
        ("sac.lr=1", "unknown section"),
        ("ppo.hidden_sizes=64", "ppo.hidden_sizes must be a list"),
    ],
)
def test_bad_values_raise_clear_errors(override, message):
    with pytest.raises((ValueError, TypeError, KeyError)) as info:
        load_config(None, [override])
    assert message in str(info.value)


def test_unknown_key_suggests_the_close_one():
    with pytest.raises(ValueError, match="did you mean ppo.learning_rate"):
        load_config(None, ["ppo.learnin_rate=0.1"])


def test_set_syntax_errors():
    with pytest.raises(ValueError, match="section.key=value"):
        apply_override({}, "trainer.num_envs")
    with pytest.raises(ValueError, match="section.key=value"):
        apply_override({}, "num_envs=3")


def test_bad_yaml_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainer: [1, 2\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_config(bad)
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="mapping"):
        load_config(listed)


def test_policies_section_validated():
    config = config_from_dict({
        "trainer": {"env": "GPUTag-v0"},
        "policies": {"tagger": {"agents": ["tagger"], "ppo": {"learning_rate": 0.01}},
                     "runner": {"agents": "runner"}},
    })
    assert config.policy_config("tagger").learning_rate == 0.01
    assert config.policy_config("runner").learning_rate == config.ppo.learning_rate
    with pytest.raises(ValueError, match="unknown key"):
        config_from_dict({"policies": {"a": {"agents": [0], "optimizer": {}}}})
    with pytest.raises(ValueError, match="needs 'agents'"):
        config_from_dict({"policies": {"a": {}}})
    with pytest.raises(ValueError, match="policies.a.ppo.clip"):
        config_from_dict({"policies": {"a": {"agents": [0], "ppo": {"clip": 0.1}}}})


def test_field_docs_cover_every_field():
    for cls in SECTIONS.values():
        docs = field_docs(cls)
        missing = [f.name for f in dataclasses.fields(cls) if not docs.get(f.name)]
        assert not missing, f"{cls.__name__} fields without a docstring: {missing}"


def test_help_config_lists_every_key_and_every_key_is_an_option():
    texts = {algo: config_help(train_cli.resolve_config(_args("--algo", algo)),
                               _args("--algo", algo))
             for algo in ("ppo", "a2c", "ddpg")}
    docs = {section: field_docs(cls) for section, cls in SECTIONS.items()}
    for section, cls in SECTIONS.items():
        text = texts["ppo" if section == "trainer" else section]
        for f in dataclasses.fields(cls):
            assert f"  {section}.{f.name} = " in text, f"{section}.{f.name}"
            assert docs[section][f.name].split()[0] in text
            # the --SECTION.KEY options stay accepted, though not in --help
            assert getattr(_args(f"--{section}.{f.name}", "1"), f"field:{section}.{f.name}") == "1"
    assert "discount factor" in texts["a2c"] and "a2c.optimizer = rmsprop" in texts["a2c"]


def _args(*argv):
    parser = argparse.ArgumentParser()
    train_cli.configure_parser(parser)
    return parser.parse_args(list(argv))


def test_cli_precedence_and_shipped_config_names():
    args = _args("cartpole_ppo", "--ppo.num_steps", "8", "--set", "ppo.num_steps=4",
                 "--num-envs", "3", "--set", "trainer.num_envs=5")
    config = train_cli.resolve_config(args)
    assert config.ppo.num_steps == 4  # --set after --section.key
    assert config.trainer.num_envs == 3  # shortcuts last
    config = train_cli.resolve_config(_args("--env", "GPUCartPole-v1", "--algo", "a2c"))
    assert config.trainer.algo == "a2c" and isinstance(config.algo_config, A2CConfig)
    assert config.a2c.num_steps == 5  # from cartpole_a2c.yaml


def test_shipped_configs_load_by_name_in_python():
    config = load_config("cartpole_ppo", ["ppo.num_steps=8"], seed=3)
    assert config.trainer.env == "GPUCartPole-v1" and config.trainer.num_envs == 16
    assert config.ppo.num_steps == 8 and config.trainer.seed == 3
    assert load_config("cartpole_a2c.yaml").trainer.algo == "a2c"
    with pytest.raises(FileNotFoundError, match="did you mean cartpole_ppo"):
        load_config("cartpole_pp")
    assert default_config_path("GPUCartPole-v1") == resolve_config_path("cartpole_ppo")


def test_a_file_beats_a_shipped_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cartpole_ppo.yaml").write_text("trainer:\n  num_envs: 3\n")
    assert load_config("cartpole_ppo.yaml").trainer.num_envs == 3
    assert load_config("cartpole_ppo").trainer.num_envs == 16  # no such file: shipped


@pytest.mark.parametrize(
    "value, message",
    [
        ("{tagger: 1, nobody: 2}", "unknown policies ['nobody']"),
        ("{}", "empty mapping"),
        ("{tagger: high}", "trainer.stop_at_return.tagger must be a number"),
        ("[1, 2]", "trainer.stop_at_return must be float or dict or null"),
    ],
)
def test_stop_at_return_is_validated(value, message):
    overrides = ["trainer.env=GPUTag-v0", "policies.tagger.agents=[tagger]",
                 "policies.runner.agents=[runner]", f"trainer.stop_at_return={value}"]
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        load_config(None, overrides)
    config = load_config(None, [*overrides[:3], "trainer.stop_at_return={tagger: 20}"])
    assert config.trainer.stop_at_return == {"tagger": 20.0}


def test_each_shipped_env_names_its_configs_and_the_folder_holds_just_those():
    named: dict[str, str] = {}
    for env_id in SHIPPED_IDS:
        names = ENVS[env_id].train_configs
        assert names, f"{env_id}: its entry in gpu_vecenv/env_ids.py names no shipped config"
        for name in names:
            assert name not in named, f"{name} is named by {named[name]} and {env_id}"
            named[name] = env_id
    files = sorted(path.stem for path in CONFIG_DIR.glob("*.yaml"))
    assert files == sorted(named), (
        f"configs/ holds {sorted(set(files) - set(named))} that no env's train_configs "
        f"names; named but missing: {sorted(set(named) - set(files))}")
    assert [path.stem for path in shipped_config_paths()] == files
    for name, env_id in named.items():
        config = load_config(name)
        assert isinstance(config, Config) and config.trainer.env == env_id, name
        # default_config_path reads the algorithm from the file without building it
        assert load_yaml(CONFIG_DIR / f"{name}.yaml")["trainer"]["algo"] == config.trainer.algo


def test_an_envs_first_config_is_its_default_and_the_first_of_an_algo_that_algos():
    for env_id in SHIPPED_IDS:
        names = ENVS[env_id].train_configs
        assert default_config_path(env_id) == CONFIG_DIR / f"{names[0]}.yaml"
        for name in names:
            algo = load_config(name).trainer.algo
            first = next(n for n in names if load_config(n).trainer.algo == algo)
            assert default_config_path(env_id, algo) == CONFIG_DIR / f"{first}.yaml"
    assert default_config_path("GPUCartPole-v1", "a2c") == resolve_config_path("cartpole_a2c")
    assert default_config_path("GPUCartPole-v1", "ddpg") is None
    assert default_config_path("NoSuchEnv-v0") is None


def test_cuda_graphs_required_on_the_cpu_is_a_clear_error(tmp_path):
    from gpu_vecenv.train.trainer import Trainer

    config = load_config(None, ["trainer.cuda_graphs=true"], device="cpu", num_envs=4,
                         run_dir=str(tmp_path), progress=False, tensorboard=False)
    with pytest.raises(ValueError, match="cuda_graphs=true, but the device is cpu"):
        Trainer(config)
    config = load_config(None, [], device="cpu", num_envs=4, run_dir=str(tmp_path),
                         progress=False, tensorboard=False)
    assert Trainer(config).graphs is None  # auto: eager on the CPU


def test_fused_kernels_required_on_the_cpu_or_for_ddpg_is_a_clear_error(tmp_path):
    from gpu_vecenv.train.trainer import Trainer

    common = {"num_envs": 4, "run_dir": str(tmp_path), "progress": False,
              "tensorboard": False, "device": "cpu"}
    with pytest.raises(ValueError, match="fused_kernels=true, but the device is cpu"):
        Trainer(load_config(None, ["trainer.fused_kernels=true"], **common))
    with pytest.raises(ValueError, match="fused_kernels=true, but .*not ddpg's"):
        Trainer(load_config(None, ["trainer.fused_kernels=true"], env="GPUPendulum-v1",
                            algo="ddpg", **common))
    trainer = Trainer(load_config(None, [], **common))
    assert trainer.groups[0].learner.fused is None  # auto: torch ops on the CPU


def test_fused_kernels_fit_networks_whose_weights_and_gradients_fit_shared_memory():
    """null uses the kernels wherever they run (measured faster in every case that fits:
    CartPole 64x64 up to 262,144-row minibatches, Tag 64x64 at 840,000); a network too
    wide for a block's shared memory stays on torch ops, with the reason."""
    import gymnasium as gym
    import torch

    from gpu_vecenv.backends import cuda_backend_problem
    from gpu_vecenv.train.distributions import ActionSpec
    from gpu_vecenv.train.ppo_mlp_kernels import choose_tile, fused_blockers

    cartpole = ActionSpec.from_space(gym.spaces.Discrete(2))
    tag = ActionSpec.from_space(gym.spaces.MultiDiscrete([21, 21]))
    cuda = torch.device("cuda")
    assert choose_tile(4, (64, 64), cartpole) == 64
    assert choose_tile(72, (64, 64), tag) == 32  # the tile shrinks to fit
    assert choose_tile(4, (256, 256), cartpole) is None
    assert choose_tile(4, (64, 64), cartpole, limit=163 * 1024) == 64  # A100
    assert choose_tile(4, (64, 64), cartpole, limit=120 * 1024) == 32
    assert choose_tile(4, (64, 64), cartpole, limit=99 * 1024) is None  # most consumer GPUs
    # tiles of 128 once a minibatch gives every multiprocessor two of them, where they fit
    assert choose_tile(4, (64, 64), cartpole, minibatch_rows=2 * 128 * 132,
                       multiprocessors=132) == 128
    assert choose_tile(4, (64, 64), cartpole, minibatch_rows=2 * 128 * 132 - 1,
                       multiprocessors=132) == 64
    assert choose_tile(4, (64, 64), cartpole, limit=163 * 1024, minibatch_rows=10**6,
                       multiprocessors=108) == 64  # A100: 220 KiB do not fit
    assert choose_tile(72, (64, 64), tag, minibatch_rows=10**6, multiprocessors=132) == 32

    def blockers(hidden):  # this machine's GPU and compiler aside
        reasons = fused_blockers("ppo", hidden, "tanh", 4, cartpole, cuda)
        return [r for r in reasons if r != cuda_backend_problem(cuda)]

    assert blockers((64, 64)) == []
    reasons = blockers((256, 256))
    assert len(reasons) == 1 and "KiB of shared memory" in reasons[0]
