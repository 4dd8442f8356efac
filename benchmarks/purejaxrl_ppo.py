# Copyright 2023 Chris Lu
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""PureJaxRL's PPO (Chris Lu, https://github.com/luchris429/purejaxrl, Apache-2.0), vendored
for side-by-side training benchmarks: ``purejaxrl/ppo.py`` and the two wrappers of
``purejaxrl/wrappers.py`` it uses, at upstream commit
31756b197773a52db763fdbe6d635e4b46522a73 (2024-09-09; the two files last changed in
5343613b07b3bc543c49695df601fc40f5ec3062). Used by ``scripts/bench_vs_purejaxrl.py``
(through :func:`gpu_vecenv.bench.load_peer`); JAX, flax, optax and gymnax are imported only
inside :func:`_upstream`, only when asked for.

Changed from upstream (the PPO itself, its network, losses, GAE, schedule, shuffling and
the order of its random keys are upstream's, line for line):

- **gymnax 1.0's step** returns ``(obs, state, reward, terminated, truncated, info)``;
  ``FlattenObservationWrapper.step`` takes those six and passes on upstream's five with
  ``done = terminated | truncated``, so the GAE, as upstream, bootstraps across neither a
  termination nor a time-limit truncation, and ``LogWrapper`` counts both as episode ends.
- **No distrax**: the policy head's ``distrax.Categorical`` is replaced by
  :class:`Categorical` below (``jax.random.categorical`` sampling, ``log_softmax``
  log-probabilities, entropy), the same distribution; distrax pulls in TensorFlow
  Probability, which the GPU machine lacks.
- **Train in chunks**: upstream's ``train(rng)`` is split into ``init(rng)`` and
  ``_update_step`` (bodies unchanged); :func:`make_train` composes them as upstream does
  (one ``lax.scan`` over all updates), :func:`make_chunked_train` runs ``updates_per_chunk``
  updates per call and returns per update the sum of the finished episodes' returns and
  their count, so a caller can stop between chunks at a mean return.
- **Config**: upstream's ``__main__`` config, sized by :func:`cartpole_config`; the
  ``__main__`` block, ``from wrappers import`` and the Brax / navix wrappers are left out.
- **Cosmetic**: the network module is made in ``_make_parts`` rather than in ``train``
  (it holds no parameters; ``init`` draws them from the same key as upstream); type
  annotations trimmed (no ``chex``, which gymnax 1.0 no longer installs; ``action_dim:
  int``); the wrappers' empty ``__init__`` overrides dropped.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from types import SimpleNamespace
from typing import Any

UPSTREAM_COMMIT = "31756b197773a52db763fdbe6d635e4b46522a73"
"""The purejaxrl commit this module was copied from."""

PACKAGES = ("jax", "jaxlib", "flax", "optax", "gymnax")
"""What the upstream code imports (distrax replaced)."""


def cartpole_config(num_envs: int, num_steps: int, total_timesteps: int,
                    **overrides: Any) -> dict[str, Any]:
    """Upstream's CartPole-v1 config (``ppo.py``'s ``__main__``) with ``num_envs`` envs,
    ``num_steps`` steps per env and update, ``total_timesteps`` env steps (the learning
    rate anneals to 0 over them), and ``overrides`` of its keys (e.g. ``LR=2.5e-4``)."""
    config = {
        "LR": 2.5e-4,
        "NUM_ENVS": num_envs,
        "NUM_STEPS": num_steps,
        "TOTAL_TIMESTEPS": total_timesteps,
        "UPDATE_EPOCHS": 4,
        "NUM_MINIBATCHES": 4,
        "GAMMA": 0.99,
        "GAE_LAMBDA": 0.95,
        "CLIP_EPS": 0.2,
        "ENT_COEF": 0.01,
        "VF_COEF": 0.5,
        "MAX_GRAD_NORM": 0.5,
        "ACTIVATION": "tanh",
        "ENV_NAME": "CartPole-v1",
        "ANNEAL_LR": True,
        "DEBUG": False,
    }
    unknown = set(overrides) - set(config)
    if unknown:
        raise KeyError(f"not PureJaxRL config keys: {sorted(unknown)}")
    config.update(overrides)
    if num_envs * num_steps > total_timesteps:
        raise ValueError(f"total_timesteps {total_timesteps:,} is less than one update "
                         f"({num_envs} envs x {num_steps} steps)")
    return config


def purejaxrl_problem() -> str | None:
    """Why PureJaxRL cannot run here (None: it can)."""
    try:
        _upstream()
    except ImportError as exc:
        return f"PureJaxRL needs {', '.join(PACKAGES)} ({exc})"
    return None


def versions() -> dict[str, str]:
    """Installed versions of the packages PureJaxRL runs on."""
    out = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def make_train(config: dict[str, Any]):
    """Upstream's ``make_train``: ``train(rng) -> {"runner_state", "metrics"}``, every
    update in one ``lax.scan`` (``jax.jit`` it). ``metrics`` is the LogWrapper's info per
    update, step and env: shape ``(NUM_UPDATES, NUM_STEPS, NUM_ENVS)``."""
    import jax

    init, update_step = _make_parts(config)

    def train(rng):
        runner_state = init(rng)
        runner_state, metric = jax.lax.scan(
            update_step, runner_state, None, config["NUM_UPDATES"]
        )
        return {"runner_state": runner_state, "metrics": metric}

    return train


def make_chunked_train(config: dict[str, Any], updates_per_chunk: int):
    """``(init, run_chunk)``: ``init(rng) -> runner_state`` and ``run_chunk(runner_state)
    -> (runner_state, (return_sums, episode_counts))``, ``updates_per_chunk`` of upstream's
    updates per call (``jax.jit`` both); ``return_sums`` and ``episode_counts``, shape
    ``(updates_per_chunk,)``: the summed returns and the number of the episodes that ended
    in each update. The learning rate anneals over ``config["TOTAL_TIMESTEPS"]`` whatever
    the chunking."""
    import jax

    init, update_step = _make_parts(config)

    def run_chunk(runner_state):
        runner_state, metric = jax.lax.scan(update_step, runner_state, None, updates_per_chunk)
        ended = metric["returned_episode"]  # (updates, NUM_STEPS, NUM_ENVS)
        return_sums = (metric["returned_episode_returns"] * ended).sum(axis=(1, 2))
        return runner_state, (return_sums, ended.sum(axis=(1, 2)))

    return init, run_chunk


def time_training(config: dict[str, Any], seed: int = 0, warmup_calls: int = 1
                  ) -> dict[str, Any]:
    """Upstream's jitted ``train``, as its users run it: compiled ahead of time, called
    ``warmup_calls`` times, then one call timed until its outputs are ready.

    Returns ``compile_seconds``, ``warmup_seconds`` (per call), ``seconds`` (the timed
    call), ``env_steps`` (``NUM_UPDATES x NUM_STEPS x NUM_ENVS``), ``env_steps_per_second``
    and ``last_update_mean_return`` (of the episodes that ended in the last update)."""
    up = _upstream()
    jax = up.jax
    rng = jax.random.PRNGKey(seed)
    start = time.perf_counter()
    train = jax.jit(make_train(config)).lower(rng).compile()
    compile_seconds = time.perf_counter() - start
    warmups = []
    for _ in range(warmup_calls):
        start = time.perf_counter()
        jax.block_until_ready(train(rng))
        warmups.append(time.perf_counter() - start)
    start = time.perf_counter()
    out = jax.block_until_ready(train(rng))
    seconds = time.perf_counter() - start
    steps = config["NUM_UPDATES"] * config["NUM_STEPS"] * config["NUM_ENVS"]
    ended = out["metrics"]["returned_episode"][-1]
    returns = out["metrics"]["returned_episode_returns"][-1]
    count = int(ended.sum())
    return {"compile_seconds": compile_seconds, "warmup_seconds": warmups,
            "seconds": seconds, "env_steps": steps, "env_steps_per_second": steps / seconds,
            "updates": config["NUM_UPDATES"],
            "last_update_mean_return": float((returns * ended).sum()) / count if count else None}


def train_until(config: dict[str, Any], stop: Callable[[float, int], bool],
                updates_per_chunk: int = 1, seed: int = 0) -> dict[str, Any]:
    """Train in chunks (:func:`make_chunked_train`) until ``stop(return_sum, episodes)``,
    called once per update in order with that update's finished episodes, says so, or
    until ``NUM_UPDATES`` (the chunks that fit) have run.

    Returns ``reached``, ``updates`` (up to the one that stopped it), ``updates_run`` (all
    of its chunk), ``env_steps`` (of ``updates``), ``compile_seconds`` (init and the chunk,
    ahead of time) and ``training_seconds`` (from the first chunk's call to the stop)."""
    up = _upstream()
    jax = up.jax
    init, run_chunk = make_chunked_train(config, updates_per_chunk)
    start = time.perf_counter()
    runner_state = jax.jit(init)(jax.random.PRNGKey(seed))
    # LogWrapper's reset makes int counters that the first update turns into floats; give
    # the first call the carry's types, so that one compiled program serves every call.
    carry = jax.eval_shape(run_chunk, runner_state)[0]
    runner_state = jax.block_until_ready(jax.tree_util.tree_map(
        lambda x, like: x.astype(like.dtype), runner_state, carry))
    chunk = jax.jit(run_chunk).lower(runner_state).compile()
    compiled = time.perf_counter()
    updates = updates_run = 0
    reached = False
    while not reached and updates_run + updates_per_chunk <= config["NUM_UPDATES"]:
        runner_state, (return_sums, counts) = chunk(runner_state)
        for return_sum, count in zip(*jax.device_get((return_sums, counts)), strict=True):
            updates += 1
            if stop(float(return_sum), int(count)):
                reached = True
                break
        updates_run += updates_per_chunk
    batch = config["NUM_STEPS"] * config["NUM_ENVS"]
    return {"reached": reached, "updates": updates, "updates_run": updates_run,
            "env_steps": updates * batch, "compile_seconds": compiled - start,
            "training_seconds": time.perf_counter() - compiled}


@functools.cache
def _upstream() -> SimpleNamespace:
    """Upstream's classes (network, transition, wrappers), defined on first use so that
    importing this module needs no JAX."""
    from functools import partial
    from typing import NamedTuple

    import flax.linen as nn
    import gymnax
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax import struct
    from flax.linen.initializers import constant, orthogonal
    from flax.training.train_state import TrainState
    from gymnax.environments import environment, spaces

    class Categorical:
        """Stands in for ``distrax.Categorical(logits=...)``: what upstream calls of it."""

        def __init__(self, logits):
            self.logits = jax.nn.log_softmax(logits, axis=-1)

        def sample(self, seed):
            return jax.random.categorical(seed, self.logits, axis=-1)

        def log_prob(self, value):
            return jnp.take_along_axis(self.logits, value[..., None], axis=-1)[..., 0]

        def entropy(self):
            return -jnp.sum(jnp.exp(self.logits) * self.logits, axis=-1)

    class ActorCritic(nn.Module):
        action_dim: int
        activation: str = "tanh"

        @nn.compact
        def __call__(self, x):
            if self.activation == "relu":
                activation = nn.relu
            else:
                activation = nn.tanh
            actor_mean = nn.Dense(
                64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0)
            )(x)
            actor_mean = activation(actor_mean)
            actor_mean = nn.Dense(
                64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0)
            )(actor_mean)
            actor_mean = activation(actor_mean)
            actor_mean = nn.Dense(
                self.action_dim, kernel_init=orthogonal(0.01), bias_init=constant(0.0)
            )(actor_mean)
            pi = Categorical(logits=actor_mean)

            critic = nn.Dense(
                64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0)
            )(x)
            critic = activation(critic)
            critic = nn.Dense(
                64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0)
            )(critic)
            critic = activation(critic)
            critic = nn.Dense(1, kernel_init=orthogonal(1.0), bias_init=constant(0.0))(
                critic
            )

            return pi, jnp.squeeze(critic, axis=-1)

    class Transition(NamedTuple):
        done: jnp.ndarray
        action: jnp.ndarray
        value: jnp.ndarray
        reward: jnp.ndarray
        log_prob: jnp.ndarray
        obs: jnp.ndarray
        info: jnp.ndarray

    class GymnaxWrapper:
        """Base class for Gymnax wrappers."""

        def __init__(self, env):
            self._env = env

        # provide proxy access to regular attributes of wrapped object
        def __getattr__(self, name):
            return getattr(self._env, name)

    class FlattenObservationWrapper(GymnaxWrapper):
        """Flatten the observations of the environment."""

        def observation_space(self, params) -> spaces.Box:
            assert isinstance(
                self._env.observation_space(params), spaces.Box
            ), "Only Box spaces are supported for now."
            return spaces.Box(
                low=self._env.observation_space(params).low,
                high=self._env.observation_space(params).high,
                shape=(np.prod(self._env.observation_space(params).shape),),
                dtype=self._env.observation_space(params).dtype,
            )

        @partial(jax.jit, static_argnums=(0,))
        def reset(self, key, params=None):
            obs, state = self._env.reset(key, params)
            obs = jnp.reshape(obs, (-1,))
            return obs, state

        @partial(jax.jit, static_argnums=(0,))
        def step(self, key, state, action, params=None):
            # gymnax >= 1.0 returns terminated and truncated apart; upstream's five values
            # have one done for both (its GAE bootstraps across neither).
            obs, state, reward, terminated, truncated, info = self._env.step(
                key, state, action, params
            )
            done = jnp.logical_or(terminated, truncated)
            obs = jnp.reshape(obs, (-1,))
            return obs, state, reward, done, info

    @struct.dataclass
    class LogEnvState:
        env_state: environment.EnvState
        episode_returns: float
        episode_lengths: int
        returned_episode_returns: float
        returned_episode_lengths: int
        timestep: int

    class LogWrapper(GymnaxWrapper):
        """Log the episode returns and lengths."""

        @partial(jax.jit, static_argnums=(0,))
        def reset(self, key, params=None):
            obs, env_state = self._env.reset(key, params)
            state = LogEnvState(env_state, 0, 0, 0, 0, 0)
            return obs, state

        @partial(jax.jit, static_argnums=(0,))
        def step(self, key, state, action, params=None):
            obs, env_state, reward, done, info = self._env.step(
                key, state.env_state, action, params
            )
            new_episode_return = state.episode_returns + reward
            new_episode_length = state.episode_lengths + 1
            state = LogEnvState(
                env_state=env_state,
                episode_returns=new_episode_return * (1 - done),
                episode_lengths=new_episode_length * (1 - done),
                returned_episode_returns=state.returned_episode_returns * (1 - done)
                + new_episode_return * done,
                returned_episode_lengths=state.returned_episode_lengths * (1 - done)
                + new_episode_length * done,
                timestep=state.timestep + 1,
            )
            info["returned_episode_returns"] = state.returned_episode_returns
            info["returned_episode_lengths"] = state.returned_episode_lengths
            info["timestep"] = state.timestep
            info["returned_episode"] = done
            return obs, state, reward, done, info

    return SimpleNamespace(jax=jax, jnp=jnp, gymnax=gymnax, optax=optax,
                           TrainState=TrainState, Categorical=Categorical,
                           ActorCritic=ActorCritic,
                           Transition=Transition, LogWrapper=LogWrapper,
                           FlattenObservationWrapper=FlattenObservationWrapper)


def _make_parts(config):
    """Upstream's ``make_train`` up to its last scan: ``(init, _update_step)``."""
    up = _upstream()
    jax, jnp, optax = up.jax, up.jnp, up.optax
    config["NUM_UPDATES"] = (
        config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"]
    )
    config["MINIBATCH_SIZE"] = (
        config["NUM_ENVS"] * config["NUM_STEPS"] // config["NUM_MINIBATCHES"]
    )
    env, env_params = up.gymnax.make(config["ENV_NAME"])
    env = up.FlattenObservationWrapper(env)
    env = up.LogWrapper(env)

    def linear_schedule(count):
        frac = (
            1.0
            - (count // (config["NUM_MINIBATCHES"] * config["UPDATE_EPOCHS"]))
            / config["NUM_UPDATES"]
        )
        return config["LR"] * frac

    # INIT NETWORK (outside ``init``: ``_update_step`` applies it too)
    network = up.ActorCritic(
        env.action_space(env_params).n, activation=config["ACTIVATION"]
    )

    def init(rng):
        rng, _rng = jax.random.split(rng)
        init_x = jnp.zeros(env.observation_space(env_params).shape)
        network_params = network.init(_rng, init_x)
        if config["ANNEAL_LR"]:
            tx = optax.chain(
                optax.clip_by_global_norm(config["MAX_GRAD_NORM"]),
                optax.adam(learning_rate=linear_schedule, eps=1e-5),
            )
        else:
            tx = optax.chain(
                optax.clip_by_global_norm(config["MAX_GRAD_NORM"]),
                optax.adam(config["LR"], eps=1e-5),
            )
        train_state = up.TrainState.create(
            apply_fn=network.apply,
            params=network_params,
            tx=tx,
        )

        # INIT ENV
        rng, _rng = jax.random.split(rng)
        reset_rng = jax.random.split(_rng, config["NUM_ENVS"])
        obsv, env_state = jax.vmap(env.reset, in_axes=(0, None))(reset_rng, env_params)

        rng, _rng = jax.random.split(rng)
        return (train_state, env_state, obsv, _rng)

    # TRAIN LOOP
    def _update_step(runner_state, unused):
        # COLLECT TRAJECTORIES
        def _env_step(runner_state, unused):
            train_state, env_state, last_obs, rng = runner_state

            # SELECT ACTION
            rng, _rng = jax.random.split(rng)
            pi, value = network.apply(train_state.params, last_obs)
            action = pi.sample(seed=_rng)
            log_prob = pi.log_prob(action)

            # STEP ENV
            rng, _rng = jax.random.split(rng)
            rng_step = jax.random.split(_rng, config["NUM_ENVS"])
            obsv, env_state, reward, done, info = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(rng_step, env_state, action, env_params)
            transition = up.Transition(
                done, action, value, reward, log_prob, last_obs, info
            )
            runner_state = (train_state, env_state, obsv, rng)
            return runner_state, transition

        runner_state, traj_batch = jax.lax.scan(
            _env_step, runner_state, None, config["NUM_STEPS"]
        )

        # CALCULATE ADVANTAGE
        train_state, env_state, last_obs, rng = runner_state
        _, last_val = network.apply(train_state.params, last_obs)

        def _calculate_gae(traj_batch, last_val):
            def _get_advantages(gae_and_next_value, transition):
                gae, next_value = gae_and_next_value
                done, value, reward = (
                    transition.done,
                    transition.value,
                    transition.reward,
                )
                delta = reward + config["GAMMA"] * next_value * (1 - done) - value
                gae = (
                    delta
                    + config["GAMMA"] * config["GAE_LAMBDA"] * (1 - done) * gae
                )
                return (gae, value), gae

            _, advantages = jax.lax.scan(
                _get_advantages,
                (jnp.zeros_like(last_val), last_val),
                traj_batch,
                reverse=True,
                unroll=16,
            )
            return advantages, advantages + traj_batch.value

        advantages, targets = _calculate_gae(traj_batch, last_val)

        # UPDATE NETWORK
        def _update_epoch(update_state, unused):
            def _update_minbatch(train_state, batch_info):
                traj_batch, advantages, targets = batch_info

                def _loss_fn(params, traj_batch, gae, targets):
                    # RERUN NETWORK
                    pi, value = network.apply(params, traj_batch.obs)
                    log_prob = pi.log_prob(traj_batch.action)

                    # CALCULATE VALUE LOSS
                    value_pred_clipped = traj_batch.value + (
                        value - traj_batch.value
                    ).clip(-config["CLIP_EPS"], config["CLIP_EPS"])
                    value_losses = jnp.square(value - targets)
                    value_losses_clipped = jnp.square(value_pred_clipped - targets)
                    value_loss = (
                        0.5 * jnp.maximum(value_losses, value_losses_clipped).mean()
                    )

                    # CALCULATE ACTOR LOSS
                    ratio = jnp.exp(log_prob - traj_batch.log_prob)
                    gae = (gae - gae.mean()) / (gae.std() + 1e-8)
                    loss_actor1 = ratio * gae
                    loss_actor2 = (
                        jnp.clip(
                            ratio,
                            1.0 - config["CLIP_EPS"],
                            1.0 + config["CLIP_EPS"],
                        )
                        * gae
                    )
                    loss_actor = -jnp.minimum(loss_actor1, loss_actor2)
                    loss_actor = loss_actor.mean()
                    entropy = pi.entropy().mean()

                    total_loss = (
                        loss_actor
                        + config["VF_COEF"] * value_loss
                        - config["ENT_COEF"] * entropy
                    )
                    return total_loss, (value_loss, loss_actor, entropy)

                grad_fn = jax.value_and_grad(_loss_fn, has_aux=True)
                total_loss, grads = grad_fn(
                    train_state.params, traj_batch, advantages, targets
                )
                train_state = train_state.apply_gradients(grads=grads)
                return train_state, total_loss

            train_state, traj_batch, advantages, targets, rng = update_state
            rng, _rng = jax.random.split(rng)
            # Batching and Shuffling
            batch_size = config["MINIBATCH_SIZE"] * config["NUM_MINIBATCHES"]
            assert (
                batch_size == config["NUM_STEPS"] * config["NUM_ENVS"]
            ), "batch size must be equal to number of steps * number of envs"
            permutation = jax.random.permutation(_rng, batch_size)
            batch = (traj_batch, advantages, targets)
            batch = jax.tree_util.tree_map(
                lambda x: x.reshape((batch_size,) + x.shape[2:]), batch
            )
            shuffled_batch = jax.tree_util.tree_map(
                lambda x: jnp.take(x, permutation, axis=0), batch
            )
            # Mini-batch Updates
            minibatches = jax.tree_util.tree_map(
                lambda x: jnp.reshape(
                    x, [config["NUM_MINIBATCHES"], -1] + list(x.shape[1:])
                ),
                shuffled_batch,
            )
            train_state, total_loss = jax.lax.scan(
                _update_minbatch, train_state, minibatches
            )
            update_state = (train_state, traj_batch, advantages, targets, rng)
            return update_state, total_loss

        # Updating Training State and Metrics:
        update_state = (train_state, traj_batch, advantages, targets, rng)
        update_state, loss_info = jax.lax.scan(
            _update_epoch, update_state, None, config["UPDATE_EPOCHS"]
        )
        train_state = update_state[0]
        metric = traj_batch.info
        rng = update_state[-1]

        # Debugging mode
        if config.get("DEBUG"):
            def callback(info):
                return_values = info["returned_episode_returns"][info["returned_episode"]]
                timesteps = info["timestep"][info["returned_episode"]] * config["NUM_ENVS"]
                for t in range(len(timesteps)):
                    print(f"global step={timesteps[t]}, episodic return={return_values[t]}")
            jax.debug.callback(callback, metric)

        runner_state = (train_state, env_state, last_obs, rng)
        return runner_state, metric

    return init, _update_step
