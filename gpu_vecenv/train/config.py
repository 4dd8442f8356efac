"""Training configuration: one dataclass per algorithm plus the run-level settings.

A run is described by :class:`Config` with sections ``trainer`` (:class:`TrainerConfig`),
``ppo``, ``a2c``, ``ddpg`` and ``policies`` (multi-agent: policy name -> agents and
per-policy overrides of the algorithm's settings). The field docstrings below are the
text of ``gpu-vecenv train --help-config``. Loading YAML, ``--set`` overrides and
validation live in :mod:`gpu_vecenv.train.config_loading`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class TrainerConfig:
    """Run-level settings (section ``trainer``)."""

    env: str = "GPUCartPole-v1"
    """registered env id (gpu-vecenv list shows them)"""
    algo: Literal["ppo", "a2c", "ddpg"] = "ppo"
    """algorithm: ppo, a2c or ddpg"""
    num_envs: int | Literal["auto"] = 64
    """number of parallel envs (for a multi-agent env: games; slots = games x agents);
    auto: the largest power of two that fits the device (see autoscale)"""
    num_envs_global: int | None = None
    """parallel envs (games) of all ranks together, split evenly over them (each rank gets
    num_envs_global / ranks; an error when that does not divide); replaces num_envs, so a
    single-GPU config keeps its global batch on any number of GPUs; null: num_envs is per
    rank (the global batch grows with the ranks)"""
    autoscale: Literal["memory", "throughput"] = "memory"
    """how num_envs: auto chooses: memory (the largest power of two whose measured memory
    fits autoscale_memory_fraction of the free memory) or throughput (up to that, the
    size past which doubling adds less than 10 % env-steps/s)"""
    autoscale_memory_fraction: float = 0.8
    """num_envs: auto: the fraction of the device's free memory a run may use"""
    autoscale_max_envs: int = 2**24
    """num_envs: auto: the most envs it may choose (on the CPU it also stays below 4,096
    vector slots)"""
    total_steps: int = 500_000
    """env steps to train for, counted over all vector slots (agent-steps for Tag)"""
    stop_at_return: float | dict | None = None
    """stop early once the mean return of the last 100 or more finished episodes reaches
    this (checked every log_interval iterations; checkpoint and evaluation follow as at
    the end); several policies: a threshold per policy, e.g. {tagger: 20}, all must be
    reached; null: train for total_steps"""
    stop_check_episodes: int = 0
    """with stop_at_return: once the training mean reaches it, also play this many
    episodes of the deterministic policy (as `gpu-vecenv eval` does) and stop only if
    their mean reaches it too, else train on and check again at the next such row (0: the
    training mean alone decides). Several policies: each one's mean return per agent"""
    seed: int = 1
    """seed of the envs, the network initialisation and the action sampling"""
    device: str = "auto"
    """torch device: auto (cuda if available, else cpu), cpu, cuda, cuda:1, ..."""
    backend: Literal["auto", "cuda", "torch"] = "auto"
    """env backend: auto, cuda (kernels) or torch (reference, any device)"""
    env_kwargs: dict = field(default_factory=dict)
    """parameters of the env (fields of its params dataclass), e.g. {num_taggers: 10}"""
    run_dir: str | None = None
    """output directory; default runs/<env>__<algo>__<seed>__<YYYYmmdd-HHMMSS>"""
    log_interval: int = 1
    """iterations between metric reads (each read is one host-device sync)"""
    checkpoint_interval: int = 20
    """iterations between checkpoints (0: only at the end)"""
    keep_checkpoints: bool = False
    """also keep each checkpoint as checkpoints/step_<global_step>.pt (latest.pt is
    overwritten): for evaluating a run at several points of its training"""
    eval_episodes: int = 100
    """episodes of the deterministic policy evaluated after training (0: none)"""
    progress: bool = True
    """show progress on stderr: a bar on a terminal, else a plain line every
    progress_interval seconds (log files, CI, nohup)"""
    progress_interval: float = 5.0
    """seconds between plain progress lines when stderr is not a terminal"""
    tensorboard: bool = True
    """write TensorBoard event files (needs the tensorboard package)"""
    torch_threads: int = 0
    """torch CPU threads; 0: 1 on a CPU device (small networks only lose from more), else
    torch's default"""
    sync_timing: bool = False
    """synchronize the GPU after roll-out and update so their logged times are exact"""
    matmul_precision: Literal["highest", "high", "medium"] = "highest"
    """float32 matrix products while the trainer lives (torch.set_float32_matmul_precision,
    restored by Trainer.close()): highest = float32; high = TF32 tensor cores on NVIDIA
    GPUs since Ampere (products with a 10-bit mantissa, float32 sums: faster for wide
    networks, results differ from highest in the low bits); medium = bfloat16 products.
    The fused PPO kernels' hidden-layer products: three split TF32 products under highest
    (float32-like accuracy), one under high and medium (ppo_mlp_kernels.MMA_PRECISIONS)"""
    compile_update: bool = False
    """torch.compile PPO's and A2C's loss on torch ops, forward and backward (fuses the
    elementwise work around the matrix products; not the fused kernels' update; not
    ddpg): the first update compiles (tens of seconds, a C++ compiler on a CPU); results
    differ from the eager loss in the low bits"""
    cuda_graphs: bool | None = None
    """capture the roll-out and the update as CUDA graphs (PPO, A2C): null = whenever
    possible (CUDA device, cuda env backend, no target_kl), true = required (error if not
    possible), false = never"""
    fused_kernels: bool | None = None
    """PPO with fused CUDA kernels (roll-out sampling, values, GAE and the minibatch
    forward/loss/backward/clip in a few launches): null = wherever possible (CUDA device
    where the kernels compile, PPO, 1-4 hidden layers of tanh/relu/elu, a network whose
    weights and gradients fit in a block's shared memory, e.g. 64x64), true = required
    (error if not possible), false = torch ops and autograd"""


@dataclass
class PPOConfig:
    """Proximal policy optimization (section ``ppo``)."""

    num_steps: int = 32
    """roll-out length per env and iteration"""
    learning_rate: float = 2.5e-4
    """Adam learning rate"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the run"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    update_epochs: int = 4
    """passes over each roll-out"""
    num_minibatches: int = 4
    """minibatches per epoch (the roll-out is shuffled each epoch)"""
    clip_coef: float = 0.2
    """surrogate clipping epsilon"""
    clip_vloss: bool = True
    """clip the value loss around the roll-out values (with clip_coef)"""
    norm_adv: bool = True
    """normalize advantages per minibatch"""
    ent_coef: float = 0.0
    """entropy bonus coefficient"""
    vf_coef: float = 0.5
    """value loss coefficient"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip"""
    target_kl: float | None = None
    """stop the epochs of an iteration once the approximate KL exceeds this (null: never)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the actor and of the critic"""
    activation: Literal["tanh", "relu", "elu"] = "tanh"
    """hidden activation"""
    init_log_std: float = 0.0
    """initial log standard deviation of Box actions (a learned, state-free parameter)"""
    normalize_obs: bool = False
    """normalize observations by running mean and variance"""
    reward_scale: float = 1.0
    """multiply rewards by this before learning"""
    bootstrap_truncated: bool = True
    """bootstrap from V(final_obs) where an episode was truncated (Gymnasium's time-limit
    convention); false: a truncation ends the game like a termination, right where the
    time limit is part of the game and the observation shows the time (Tag)"""


@dataclass
class A2CConfig:
    """Advantage actor-critic (section ``a2c``): one gradient step per roll-out."""

    num_steps: int = 5
    """roll-out length per env and iteration (n of the n-step returns)"""
    learning_rate: float = 7e-4
    """learning rate"""
    optimizer: Literal["rmsprop", "adam"] = "rmsprop"
    """optimizer (rmsprop: alpha 0.99, eps 1e-5 as in SB3/OpenAI baselines)"""
    anneal_lr: bool = False
    """decay the learning rate linearly to 0 over the run"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 1.0
    """GAE lambda; 1.0 gives plain n-step returns"""
    norm_adv: bool = False
    """normalize advantages over the roll-out"""
    ent_coef: float = 0.0
    """entropy bonus coefficient"""
    vf_coef: float = 0.5
    """value loss coefficient"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the actor and of the critic"""
    activation: Literal["tanh", "relu", "elu"] = "tanh"
    """hidden activation"""
    init_log_std: float = 0.0
    """initial log standard deviation of Box actions"""
    normalize_obs: bool = False
    """normalize observations by running mean and variance"""
    reward_scale: float = 1.0
    """multiply rewards by this before learning"""
    bootstrap_truncated: bool = True
    """bootstrap from V(final_obs) where an episode was truncated (Gymnasium's time-limit
    convention); false: a truncation ends the game like a termination, right where the
    time limit is part of the game and the observation shows the time (Tag)"""


@dataclass
class DDPGConfig:
    """Deep deterministic policy gradient (section ``ddpg``); Box actions only."""

    buffer_size: int = 1_000_000
    """replay capacity in transitions (preallocated on the device)"""
    batch_size: int = 256
    """transitions per gradient step"""
    actor_learning_rate: float = 1e-3
    """Adam learning rate of the actor"""
    critic_learning_rate: float = 1e-3
    """Adam learning rate of the critic"""
    gamma: float = 0.99
    """discount factor"""
    tau: float = 0.005
    """soft update rate of the target networks"""
    learning_starts: int = 10_000
    """env steps of uniform random actions before learning starts (warm-up)"""
    train_frequency: int = 1
    """vector steps between rounds of gradient steps"""
    gradient_steps: int = 1
    """gradient steps per round"""
    policy_delay: int = 1
    """critic steps per actor and target update (1: DDPG; 2: TD3-style delay)"""
    noise: Literal["gaussian", "ou"] = "gaussian"
    """exploration noise: gaussian or ou (Ornstein-Uhlenbeck, per env)"""
    noise_std: float = 0.1
    """noise scale, as a fraction of the half-width of the action range"""
    ou_theta: float = 0.15
    """mean reversion rate of the OU noise"""
    max_grad_norm: float | None = None
    """global gradient-norm clip (null: none)"""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layer widths of the actor and of the critic"""
    activation: Literal["tanh", "relu", "elu"] = "relu"
    """hidden activation"""
    normalize_obs: bool = False
    """normalize observations by running mean and variance"""
    reward_scale: float = 1.0
    """multiply rewards by this before learning"""
    save_replay_buffer: bool = True
    """store the replay buffer in checkpoints (needed for an exact resume)"""


ALGO_CONFIGS: dict[str, type] = {"ppo": PPOConfig, "a2c": A2CConfig, "ddpg": DDPGConfig}
SECTIONS: dict[str, type] = {"trainer": TrainerConfig, **ALGO_CONFIGS}


@dataclass
class PolicySpec:
    """One policy of a multi-agent run: which agent slots it controls and its overrides."""

    agents: list[str | int]
    """roles (e.g. "tagger", "runner") or agent ids within a game"""
    overrides: dict[str, Any] = field(default_factory=dict)
    """fields of the algorithm's config that differ for this policy"""


@dataclass
class Config:
    """A whole run: sections ``trainer``, ``ppo``, ``a2c``, ``ddpg`` and ``policies``."""

    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    a2c: A2CConfig = field(default_factory=A2CConfig)
    ddpg: DDPGConfig = field(default_factory=DDPGConfig)
    policies: dict[str, PolicySpec] = field(default_factory=dict)
    """multi-agent: policy name -> PolicySpec; empty: one policy for every slot"""

    @property
    def algo_config(self) -> PPOConfig | A2CConfig | DDPGConfig:
        """The section of ``trainer.algo``."""
        return getattr(self, self.trainer.algo)

    def policy_config(self, name: str) -> PPOConfig | A2CConfig | DDPGConfig:
        """The algorithm config of policy ``name``, with its overrides applied."""
        spec = self.policies.get(name)
        if spec is None or not spec.overrides:
            return self.algo_config
        return dataclasses.replace(self.algo_config, **spec.overrides)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (YAML- and checkpoint-safe: lists, not tuples)."""
        out: dict[str, Any] = {name: _plain(dataclasses.asdict(getattr(self, name)))
                               for name in SECTIONS}
        out["policies"] = {
            name: {"agents": list(spec.agents),
                   **({self.trainer.algo: _plain(spec.overrides)} if spec.overrides else {})}
            for name, spec in self.policies.items()
        }
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
