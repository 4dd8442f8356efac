"""Our trainers' configs for WarpDrive's Tag training run: the same game and batch.

WarpDrive 2.7.1 trains ``tag_continuous`` from ``warp_drive/training/run_configs/
tag_continuous.yaml`` (:data:`WARPDRIVE_TAG_CONTINUOUS`, copied here so that tests run
without WarpDrive; the benchmark reads the installed file and records whether it still
equals this copy). :func:`our_a2c_config` derives our A2C run from it, field by field:

- env: every key of its ``env`` section but ``seed`` is a :class:`TagParams` field of the
  same name and meaning; plus ``observe_own_role=False`` (WarpDrive's observation: each
  of our policies plays one role, so the feature would be a constant) and
  ``fixed_start_positions`` (WarpDrive always replays one start layout: ``True`` by
  default; ours and WarpDrive's layouts differ, they are drawn by different RNGs);
- batch: ``num_envs`` games, ``train_batch_size / num_envs`` steps per game and iteration
  (100 x 250 = 25,000 game steps = 2.75M agent-steps), one gradient step per iteration;
- A2C per policy (tagger, runner): Adam at its ``lr`` (constant), ``gamma``, n-step
  returns over the roll-out (``gae_lambda=1``), no bootstrap at the time limit (its done
  flag ends the return), ``entropy_coeff``, ``vf_loss_coeff`` (ours weights ``0.5 *
  MSE``, WarpDrive's plain MSE: ours is twice its coefficient), ``max_grad_norm``,
  ``normalize_advantage``; hidden sizes ``fc_dims`` with ReLU.

What stays different (:data:`A2C_DIFFERENCES`) is recorded with the results.
:func:`our_ppo_config` is our shipped ``tag_ppo`` on the same game.
"""

from __future__ import annotations

import copy
from dataclasses import fields
from typing import Any

from gpu_vecenv.envs.tag import TagParams

WARPDRIVE_TAG_CONTINUOUS: dict[str, Any] = {
    "name": "tag_continuous",
    "env": {
        "num_taggers": 10, "num_runners": 100, "grid_length": 20.0, "episode_length": 500,
        "max_acceleration": 0.1, "min_acceleration": -0.1, "max_turn": 2.356,
        "min_turn": -2.356, "num_acceleration_levels": 20, "num_turn_levels": 20,
        "skill_level_runner": 1.0, "skill_level_tagger": 1.0, "max_speed": 1.0,
        "seed": 274880, "use_full_observation": False,
        "runner_exits_game_after_tagged": True, "num_other_agents_observed": 10,
        "tag_reward_for_tagger": 10.0, "tag_penalty_for_runner": -10.0,
        "step_penalty_for_tagger": 0.0, "step_reward_for_runner": 0.0,
        "edge_hit_penalty": 0.0, "end_of_game_reward_for_runner": 1.0,
        "tagging_distance": 0.02,
    },
    "trainer": {"num_envs": 100, "num_episodes": 500, "train_batch_size": 25000},
    "policy": {
        name: {
            "to_train": True, "algorithm": "A2C", "vf_loss_coeff": 1, "entropy_coeff": 0.05,
            "clip_grad_norm": True, "max_grad_norm": 0.5, "normalize_advantage": False,
            "normalize_return": False, "gamma": 0.98, "lr": lr,
            "model": {"type": "fully_connected", "fc_dims": [256, 256],
                      "model_ckpt_filepath": ""},
        }
        for name, lr in (("runner", 0.005), ("tagger", 0.001))
    },
    "saving": {"metrics_log_freq": 100, "model_params_save_freq": 5000, "basedir": "/tmp",
               "name": "tag_continuous", "tag": "experiments"},
}
"""``tag_continuous.yaml`` of rl-warp-drive 2.7.1, as ``yaml.safe_load`` reads it."""

A2C_DIFFERENCES = (
    "networks: WarpDrive's policy and value heads share one 256x256 trunk; ours are two "
    "256x256 MLPs (actor, critic), about twice the multiply-adds",
    "initialisation: WarpDrive torch's default; ours orthogonal (gain sqrt 2, policy head 0.01)",
    "bootstrap: WarpDrive's return at the roll-out's last step is V of that step's own "
    "observation; ours V of the next observation",
    "averaging: WarpDrive's losses average over every agent slot, tagged runners' too; ours "
    "over the live slots",
    "starts: both replay one start layout (fixed_start_positions), but not the same one",
)


def _env_kwargs(env: dict[str, Any], fixed_starts: bool) -> dict[str, Any]:
    names = {f.name for f in fields(TagParams)}
    kwargs = {k: v for k, v in env.items() if k != "seed"}
    unknown = sorted(set(kwargs) - names)
    if unknown:
        raise ValueError(f"WarpDrive env keys with no TagParams field: {unknown}")
    return dict(kwargs, observe_own_role=False, fixed_start_positions=fixed_starts)


def tag_params(warpdrive: dict[str, Any], fixed_starts: bool = True) -> TagParams:
    """The game all three trainers play (:func:`our_a2c_config`'s ``env_kwargs``)."""
    return TagParams(**_env_kwargs(warpdrive["env"], fixed_starts))


def steps_per_game(warpdrive: dict[str, Any]) -> int:
    """WarpDrive's roll-out length: ``train_batch_size / num_envs`` (250)."""
    trainer = warpdrive["trainer"]
    steps, left = divmod(trainer["train_batch_size"], trainer["num_envs"])
    if left or not steps:
        raise ValueError(f"train_batch_size {trainer['train_batch_size']} is not a multiple "
                         f"of num_envs {trainer['num_envs']}")
    return steps


def _a2c_of(policy: dict[str, Any]) -> dict[str, Any]:
    if policy["algorithm"] != "A2C" or not policy["to_train"]:
        raise ValueError(f"expected a trained A2C policy, got {policy['algorithm']}")
    if policy["model"]["type"] != "fully_connected" or policy["normalize_return"]:
        raise ValueError("only fully_connected models without return normalisation map")
    return {"learning_rate": float(policy["lr"]), "gamma": float(policy["gamma"]),
            "ent_coef": float(policy["entropy_coeff"]),
            "vf_coef": 2.0 * float(policy["vf_loss_coeff"]),
            "max_grad_norm": float(policy["max_grad_norm"]) if policy["clip_grad_norm"]
            else 1e9,
            "norm_adv": bool(policy["normalize_advantage"]),
            "hidden_sizes": [int(d) for d in policy["model"]["fc_dims"]]}


def _trainer_section(warpdrive: dict[str, Any], algo: str, fixed_starts: bool,
                     seed: int, total_steps: int) -> dict[str, Any]:
    return {"env": "GPUTag-v0", "algo": algo, "num_envs": int(warpdrive["trainer"]["num_envs"]),
            "env_kwargs": _env_kwargs(warpdrive["env"], fixed_starts), "seed": seed,
            "total_steps": total_steps, "log_interval": 1, "checkpoint_interval": 0,
            "eval_episodes": 0, "progress": False, "tensorboard": False}


def our_a2c_config(warpdrive: dict[str, Any], *, fixed_starts: bool = True, seed: int = 1,
                   total_steps: int = 10**12) -> dict[str, Any]:
    """Our A2C run of WarpDrive's ``tag_continuous`` config, in our YAML layout (for
    ``config_from_dict``); ``total_steps`` counts agent-steps."""
    per_policy = {name: _a2c_of(p) for name, p in warpdrive["policy"].items()}
    if set(per_policy) != {"tagger", "runner"}:
        raise ValueError(f"expected policies tagger and runner, got {sorted(per_policy)}")
    return {
        "trainer": _trainer_section(warpdrive, "a2c", fixed_starts, seed, total_steps),
        "a2c": {"num_steps": steps_per_game(warpdrive), "optimizer": "adam",
                "anneal_lr": False, "gae_lambda": 1.0, "activation": "relu",
                "bootstrap_truncated": False},
        "policies": {name: {"agents": [name], "a2c": a2c} for name, a2c in per_policy.items()},
    }


def our_ppo_config(warpdrive: dict[str, Any], *, fixed_starts: bool = True, seed: int = 1,
                   total_steps: int = 10**12) -> dict[str, Any]:
    """Our shipped ``tag_ppo`` (its PPO section and policies as shipped) on the game and
    games of WarpDrive's config."""
    from gpu_vecenv.train.config_loading import load_yaml
    from gpu_vecenv.train.shipped_configs import resolve_config_path

    raw = copy.deepcopy(load_yaml(resolve_config_path("tag_ppo")))
    raw["trainer"].update(_trainer_section(warpdrive, "ppo", fixed_starts, seed, total_steps))
    return raw


def agent_steps_per_iteration(warpdrive: dict[str, Any]) -> int:
    """WarpDrive's batch in agent-steps: ``train_batch_size x`` agents a game."""
    env = warpdrive["env"]
    return int(warpdrive["trainer"]["train_batch_size"]) * (env["num_taggers"]
                                                            + env["num_runners"])
