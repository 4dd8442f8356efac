"""``T`` steps of an env and the user's torch policy, replayed as one CUDA graph.

A plain loop pays Python for every step: the policy's ops and ``env.step()`` each cost
microseconds of host time, whatever the batch size, which at small batches is most of the
time. :func:`capture_rollout` runs the loop eagerly for a few warm-up calls, then captures
``T`` steps of it (the policy's kernels, the env's step, the storage writes) into a CUDA
graph, and from then on a call is one replay: the same kernels on the same tensors, so the
same bits as the eager loop, without the per-op host cost.

How the capture stays equal to the eager loop:

- fixed addresses: the env writes each step's outputs straight into the preallocated
  :class:`~gpu_vecenv.trajectory.Trajectory` (through its backend, as ``env.step`` does,
  so the env's ``copy`` setting does not matter); the policy reads ``obs[t]`` from it;
- actions: the graph keeps each step's action tensor and copies a group of steps' actions
  into ``actions`` at once (one node, not one a step: each node costs about a microsecond
  a step on the GPU). That needs the action to be a tensor of its own that nothing writes
  later in the call, as any torch op's result is; a policy that returns the same buffer
  every step is detected at capture and gets a copy per step instead;
- random numbers: torch registers its default CUDA generator with every graph, and a replay
  draws from the generator's current offset and then advances it as the eager ops would
  (``CUDAGeneratorState::replay_prologue`` in ``aten/src/ATen/cuda/CUDAGeneratorImpl.cpp``);
  generators of the user's own go in ``generators=``;
- warm-up: :data:`WARMUP_CALLS` eager calls, so lazy initialisation (the policy's
  first-call work, cuBLAS handles, ``torch.compile``) happens outside the graph;
- streams: every call, eager or replayed, runs on the caller's current stream, in order
  with the caller's own work; only the capture runs on a side stream, between two device
  synchronizations (see :meth:`CapturedRollout._capture`);
- invalid actions: the env counts them on the device as in any step; the count reaches the
  host asynchronously (:class:`~gpu_vecenv.deferred_errors.DeferredErrors`), so a later
  call raises, and :meth:`CapturedRollout.check_errors` raises at once.

What cannot be captured (the capture raises, naming the cause): host-side policies (numpy,
``.cpu()``, ``.item()``, ``bool(tensor)``, printing tensors, ``torch.distributions``'
argument checks), shapes that depend on values (``nonzero``, boolean-mask indexing), a
``torch.Generator`` not passed in ``generators=``; envs with ``strict=True`` (a host check of
every action), ``torch_graphs=True`` or ``torch_compile=True`` (the torch backend's own graph
or compiled step), ``render_mode="human"``, Gymnasium wrappers (Python in every step), and
the Tag envs on the torch backend (their reference copies tables from the host every step).
On devices other than CUDA every call runs the eager loop: same storage, same results.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.actions import InvalidActionError
from gpu_vecenv.buffers import StepOutputs
from gpu_vecenv.deferred_errors import ERROR_FLAG_INTERVAL, DeferredErrors
from gpu_vecenv.multi_agent import MultiAgentVectorEnv
from gpu_vecenv.trajectory import Trajectory
from gpu_vecenv.vector_env import GpuVectorEnv

WARMUP_CALLS = 2
"""Eager calls before the capture (at least one: it runs ``env.step()``'s checks)."""

DEFERRED_ACTION_BYTES = 32 << 20
"""A captured roll-out copies the policy's actions into the trajectory in groups of at most
this many bytes (one copy per group rather than per step): the graph's memory pool holds a
group's actions until they are copied."""

Policy = Callable[[torch.Tensor], torch.Tensor]

_CAPTURE_FAILED = (
    "capturing the roll-out into a CUDA graph failed: the policy (or something it calls) did "
    "what a graph cannot hold. Inside the capture nothing may wait for the GPU or read a "
    "tensor on the host (.item(), .cpu(), .tolist(), bool(tensor), print(tensor), numpy, "
    "torch.distributions' argument checks: pass validate_args=False), produce a shape that "
    "depends on values (nonzero, boolean-mask indexing, unique), or draw from a "
    "torch.Generator not passed in generators=. capture=False runs the same roll-out "
    "eagerly. The error: {error}"
)


def capture_problems(env: GpuVectorEnv | MultiAgentVectorEnv) -> list[str]:
    """Why the settings of ``env`` keep its steps out of a CUDA graph (empty: they don't).
    Independent of the device: on a CUDA device :class:`CapturedRollout` refuses such an
    env, elsewhere it runs eagerly anyway."""
    problems = []
    if env.strict:
        problems.append("strict=True checks every action batch on the host before stepping "
                        "(a GPU sync per step); make the env with strict=False: invalid "
                        "actions are then reported after the replay")
    if getattr(env, "torch_graphs", False) and env.backend_name == "torch":
        problems.append("torch_graphs=True replays each step as a graph of its own; make the "
                        "env with torch_graphs=False (the roll-out's graph holds the steps)")
    if getattr(env, "torch_compile", False) and env.backend_name == "torch":
        problems.append("torch_compile=True: a compiled step could recompile inside the "
                        "capture; make the env with torch_compile=False (the captured "
                        "roll-out already removes the per-op launch cost)")
    if env.render_mode == "human":
        problems.append("render_mode='human' draws a window after every step on the host")
    return problems


def capture_rollout(env: GpuVectorEnv | MultiAgentVectorEnv, policy: Policy, num_steps: int,
                    *, generators: Sequence[torch.Generator] = (),
                    warmup_calls: int = WARMUP_CALLS, capture: bool = True
                    ) -> CapturedRollout:
    """A callable that runs ``num_steps`` steps of ``env`` driven by ``policy`` and fills a
    preallocated :class:`~gpu_vecenv.trajectory.Trajectory`; on a CUDA device, after
    ``warmup_calls`` eager calls, every call is one CUDA-graph replay with the eager loop's
    results, bit for bit. See :class:`CapturedRollout`.

    Example::

        env = gpu_vecenv.make_vec("GPUCartPole-v1", 4096, device="cuda")
        rollout = gpu_vecenv.capture_rollout(
            env, lambda obs: torch.randint(0, 2, (4096,), device="cuda"), num_steps=128)
        obs, _ = env.reset(seed=0)
        for _ in range(100):
            trajectory = rollout(obs)  # obs/actions/rewards/... (128, 4096, ...)
            obs = trajectory.next_obs
    """
    return CapturedRollout(env, policy, num_steps, generators=generators,
                           warmup_calls=warmup_calls, capture=capture)


class CapturedRollout:
    """``num_steps`` steps of ``env`` and ``policy`` per call, written into :attr:`trajectory`.

    Args:
        env: a gpu_vecenv env: a :class:`~gpu_vecenv.vector_env.GpuVectorEnv` (the classic
            envs, either backend) or a multi-agent slot view such as ``GPUTag-v0``
            (:class:`~gpu_vecenv.multi_agent.MultiAgentVectorEnv`), not wrapped.
        policy: ``obs -> action``, run under ``torch.no_grad()``: ``obs`` is
            ``(num_envs, obs_dim)`` float32 on the env's device; the action a tensor on the
            same device that ``env.step`` accepts (``(num_envs,)`` integers for Discrete,
            ``(num_envs, *shape)`` floats for Box, ...). Only torch ops on the device, no
            host reads (see the module docstring). What the graph holds is fixed at capture:
            the policy's tensors must keep their memory (optimizers and ``load_state_dict``
            update parameters in place), and Python state it reads (``module.training``,
            plain-number hyperparameters) keeps its value of that time. An action it
            returned must not be written by a later step of the call (return a new tensor
            or the same buffer every step, both fine; see the module docstring).
        num_steps: ``T``, steps per call (>= 1).
        generators: ``torch.Generator`` objects on the env's device that the policy draws
            from besides torch's default one (which is always included); replays advance
            them as eager draws do.
        warmup_calls: eager calls before the capture (>= 1).
        capture: ``False`` runs every call eagerly (same storage, same results): to debug
            a policy, or to compare.

    Calling it with the observation to start from (from ``env.reset()``, ``env.step()``,
    or the last call's ``trajectory.next_obs``) runs ``T`` steps and returns the
    :class:`~gpu_vecenv.trajectory.Trajectory` (the same object every call, overwritten).
    The env's state carries on: step it, reset it or call again, passing the observation
    it last returned. A replayed call never waits for the GPU.

    Raises (at construction): ``TypeError`` for an env that is no gpu_vecenv env or a
    policy that is not callable; ``ValueError`` for a bad ``num_steps`` or
    ``warmup_calls``, or, on a CUDA device, an env whose settings cannot be captured
    (:func:`capture_problems`).
    """

    def __init__(self, env: GpuVectorEnv | MultiAgentVectorEnv, policy: Policy,
                 num_steps: int, *, generators: Sequence[torch.Generator] = (),
                 warmup_calls: int = WARMUP_CALLS, capture: bool = True):
        if not isinstance(env, (GpuVectorEnv, MultiAgentVectorEnv)):
            raise TypeError(
                f"capture_rollout needs a gpu_vecenv env (GpuVectorEnv, or a multi-agent slot "
                f"view such as GPUTag-v0), got {type(env).__name__}; a Gymnasium wrapper runs "
                f"Python in every step(), which a CUDA graph cannot replay (pass env.unwrapped "
                f"if the wrapper's per-step work is not needed)")
        if not callable(policy):
            raise TypeError(f"policy must be callable (obs -> action), got {policy!r}")
        for name, value in (("num_steps", num_steps), ("warmup_calls", warmup_calls)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        self.env, self.policy, self.num_steps = env, policy, num_steps
        self.device = env.device
        self.warmup_calls = warmup_calls
        self._generators = tuple(generators)
        self.eager_reason: str | None = None
        """Why every call runs eagerly (``None``: calls are captured after the warm-up)."""
        if not capture:
            self.eager_reason = "capture=False"
        elif self.device.type != "cuda":
            self.eager_reason = f"the env's device is {self.device.type}, not cuda"
        else:
            problems = capture_problems(env)
            if problems:
                raise ValueError("this env's steps cannot be captured: " + "; ".join(problems))
        for generator in self._generators:
            if not isinstance(generator, torch.Generator) or \
                    generator.device.type != self.device.type:
                raise TypeError(f"generators must be torch.Generator objects on "
                                f"{self.device.type}, the env's device, got {generator!r}")
        self.trajectory = Trajectory.allocate(
            num_steps, env.num_envs, env.obs_dim, env.actions.shape[1:], env.actions.dtype,
            self.device, with_final_obs=env.autoreset_mode == AutoresetMode.SAME_STEP,
            with_active=isinstance(env, MultiAgentVectorEnv))
        self._rows = self.trajectory.observation_rows()
        self._calls = 0
        self._graph: torch.cuda.CUDAGraph | None = None
        self.actions_deferred = False
        """Whether the graph copies the policy's actions into the trajectory in groups
        (see :meth:`_steps`; set at capture)."""
        self._errors = (DeferredErrors(env.buffers.error_count, asynchronous=True)
                        if self.eager_reason is None else None)

    @property
    def captured(self) -> bool:
        """Whether calls replay the graph (from the call after the warm-up on)."""
        return self._graph is not None

    def __call__(self, obs: torch.Tensor) -> Trajectory:
        """Run ``num_steps`` steps from ``obs`` (``(num_envs, obs_dim)`` on the env's
        device) and return the filled trajectory.

        Raises:
            InvalidActionError: the policy's action has the wrong shape or dtype (at once),
                or invalid values (out of range, NaN) were counted in earlier calls and the
                count has reached the host.
        """
        if self.env.closed:
            raise gym.error.ClosedEnvironmentError("the roll-out's env is closed")
        self._report_errors(sync=False)
        self._start_from(obs)
        if self.eager_reason is None and self._graph is None and \
                self._calls >= self.warmup_calls:
            self._capture()
        if self._graph is not None:
            self._graph.replay()
            self._count_steps_for_error_copies()
        else:
            self._steps(captured=False)
        self._calls += 1
        return self.trajectory

    def check_errors(self) -> None:
        """Raise :class:`~gpu_vecenv.actions.InvalidActionError` now if any step since the
        last check got an invalid action (waits for the GPU)."""
        if self._errors is None:
            self.env.check_errors()
        else:
            self._report_errors(sync=True)

    # -- the loop, eager or captured --

    def _start_from(self, obs: torch.Tensor) -> None:
        expected = (self.env.num_envs, self.env.obs_dim)
        if not isinstance(obs, torch.Tensor) or tuple(obs.shape) != expected \
                or obs.device != self.device:
            described = (f"a tensor of shape {tuple(obs.shape)} on {obs.device}"
                         if isinstance(obs, torch.Tensor) else type(obs).__name__)
            raise ValueError(f"obs must be the env's observation, a tensor of shape {expected} "
                             f"on {self.device}; got {described}")
        # The loop copies next_obs into obs[0] first, so a start given here goes there.
        if obs is not self.trajectory.next_obs:
            self.trajectory.next_obs.copy_(obs)

    def _steps(self, captured: bool, defer_actions: bool = False) -> list[int]:
        """The ``T`` steps. Eagerly through ``env.step()`` (its checks, its error reports),
        captured through the env's backend straight into the storage, as ``env.step()``
        calls it: same kernels, same inputs, same bits.

        ``defer_actions`` (captured only): the policy's actions are held and copied into
        ``trajectory.actions`` together, up to :data:`DEFERRED_ACTION_BYTES` of them at a
        time (one ``torch.stack``), instead of by one copy a step: a graph node fewer per
        step. Right when each step's action is a tensor of its own that nothing writes
        afterwards, as a torch op's result is; :meth:`_capture` checks what storage
        identity can tell. Returns the storage address of each deferred action."""
        rows, trajectory = self._rows, self.trajectory
        outputs = self._step_outputs() if captured else None
        rows[0].copy_(rows[-1])
        group = self._action_group()
        held: list[torch.Tensor] = []
        storages: list[int] = []
        with torch.no_grad():
            for t in range(self.num_steps):
                action = self._act(rows[t])
                if defer_actions:
                    held.append(action)
                    storages.append(action.untyped_storage().data_ptr())
                else:
                    trajectory.actions[t].copy_(action)
                if outputs is not None:
                    self.env.backend.step(action, outputs[t])
                else:
                    self._eager_step(action, t)
                if held and (len(held) == group or t + 1 == self.num_steps):
                    torch.stack(held, out=trajectory.actions[t + 1 - len(held):t + 1])
                    held = []
        return storages

    def _act(self, obs: torch.Tensor) -> torch.Tensor:
        action = self.policy(obs)
        if not isinstance(action, torch.Tensor) or action.device != self.device:
            got = (f"a tensor on {action.device}" if isinstance(action, torch.Tensor)
                   else type(action).__name__)
            raise TypeError(f"the policy must return its action as a tensor on {self.device} "
                            f"(computed by torch ops there; a host-side policy cannot be "
                            f"captured), got {got}")
        return self.env.actions.convert(action)

    def _eager_step(self, action: torch.Tensor, t: int) -> None:
        obs, reward, terminated, truncated, info = self.env.step(action)
        trajectory = self.trajectory
        self._rows[t + 1].copy_(obs)
        trajectory.rewards[t].copy_(reward)
        trajectory.terminated[t].copy_(terminated)
        trajectory.truncated[t].copy_(truncated)
        if trajectory.final_obs is not None:
            trajectory.final_obs[t].copy_(info["final_obs"])
        if trajectory.active is not None:
            trajectory.active[t].copy_(info["active"])

    def _step_outputs(self) -> list[StepOutputs]:
        """Per step, the storage's views in the form the env's backend writes."""
        trajectory = self.trajectory
        return [
            StepOutputs(obs=self._rows[t + 1], reward=trajectory.rewards[t],
                        terminated=trajectory.terminated[t], truncated=trajectory.truncated[t],
                        final_obs=None if trajectory.final_obs is None
                        else trajectory.final_obs[t],
                        active=None if trajectory.active is None else trajectory.active[t])
            for t in range(self.num_steps)
        ]

    # -- the graph --

    def _capture(self) -> None:
        """Capture :meth:`_steps` into the graph that every later call replays.

        Why no stream race is possible: the roll-out's work runs on the caller's current
        stream (the warm-up calls, every replay, the copy of a start observation), in the
        order the host issues it, so no tensor is used on two streams by our code. Only the
        capture needs a side stream of its own (CUDA cannot capture the legacy default
        stream), and it is fenced by device-wide synchronizations:

        - before: nothing queued is still running when capturing starts (torch.cuda.graph
          synchronizes on entry too; this one keeps the argument independent of that);
        - after: torch's capture_begin queues real, eager kernels on the capture stream:
          it writes the seed and offset of every registered generator's in-graph RNG state
          (``capture_prologue`` in torch 2.11's ``CUDAGeneratorImpl.cpp``: offset 0),
          while the first replay, on the caller's stream, writes the generator's current
          offset there and launches the graph. Unordered, the capture stream's write of 0
          could land between the two, and that replay would draw the numbers of offset 0
          (seen under GPU contention: a few captured calls differed from the eager loop).
          After this synchronization the capture stream holds no work and is never used
          again.
        """
        for defer_actions in (True, False):
            graph = torch.cuda.CUDAGraph()
            for generator in self._generators:
                graph.register_generator_state(generator)
            # A graph freed while another is being captured invalidates the capture:
            # collect unreachable ones now (torch.cuda.graph no longer does by default).
            gc.collect()
            torch.cuda.synchronize(self.device)
            try:
                with torch.cuda.device(self.device), \
                        torch.cuda.graph(graph, stream=torch.cuda.Stream(self.device)):
                    storages = self._steps(captured=True, defer_actions=defer_actions)
            except RuntimeError as exc:
                lines = str(exc).strip().splitlines() or [type(exc).__name__]
                raise RuntimeError(_CAPTURE_FAILED.format(error=lines[0])) from exc
            torch.cuda.synchronize(self.device)
            if not defer_actions or self._actions_are_fresh(storages):
                break
            graph = None  # its deferred copies could read actions the policy overwrote
        self._graph = graph
        self.actions_deferred = defer_actions

    def _action_group(self) -> int:
        """Steps whose actions a deferred copy takes at once (:data:`DEFERRED_ACTION_BYTES`)."""
        actions = self.trajectory.actions
        return max(1, DEFERRED_ACTION_BYTES // max(1, actions[0].numel() * actions.element_size()))

    def _actions_are_fresh(self, storages: list[int]) -> bool:
        """Whether the deferred copies of :meth:`_steps` read what each step's policy
        returned: no storage returned twice while held for one group (a policy that writes
        its action into the same buffer every step), and none in the trajectory's tensors
        (an action that is a view of the observations)."""
        trajectory = self.trajectory
        own = {tensor.untyped_storage().data_ptr() for tensor in (
            trajectory.obs, trajectory.actions, trajectory.rewards, trajectory.terminated,
            trajectory.truncated, trajectory.final_obs, trajectory.active)
            if tensor is not None}
        group = self._action_group()
        for first in range(0, len(storages), group):
            held = storages[first:first + group]
            if len(set(held)) != len(held) or own.intersection(held):
                return False
        return True

    # -- invalid actions --

    def _count_steps_for_error_copies(self) -> None:
        """Let the copies of the device's invalid-action count keep the env's cadence in
        env steps: one at least every ERROR_FLAG_INTERVAL steps, so after every call of
        ERROR_FLAG_INTERVAL steps or more (``after_step`` copies at most once per run of
        ERROR_FLAG_INTERVAL calls)."""
        for _ in range(min(self.num_steps, ERROR_FLAG_INTERVAL)):
            self._errors.after_step()

    def _report_errors(self, sync: bool) -> None:
        if self._errors is None:
            return
        count = self._errors.take(sync)
        if count:
            raise InvalidActionError(
                f"{count} invalid action(s) (out of range, NaN or inf for "
                f"{self.env.single_action_space}) in captured roll-out steps since the last "
                f"check; the envs that got them were left unchanged on those steps. A "
                f"captured roll-out cannot check actions before stepping (as strict=True "
                f"does): keep the policy's actions inside the action space.")

    def __repr__(self) -> str:
        state = "captured" if self.captured else (
            f"eager ({self.eager_reason})" if self.eager_reason else
            f"warming up ({self._calls}/{self.warmup_calls} calls)")
        return (f"CapturedRollout({self.env!r}, num_steps={self.num_steps}, {state})")
