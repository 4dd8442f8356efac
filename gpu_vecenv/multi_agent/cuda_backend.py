"""The CUDA backend of multi-agent envs: ``cuda_src/<name>.cu`` run through its
:class:`~gpu_vecenv.multi_agent.kernel_binding.GameKernelBinding`.

Same interface and semantics as :class:`gpu_vecenv.multi_agent.torch_backend.MultiAgentTorchBackend`
(the GPU tests hold them together). Compiling, loading and the stream rules are those of
:mod:`gpu_vecenv.backends.cuda` (PyTorch's primary context, torch-allocated buffers,
launches on torch's current stream, capturable into CUDA graphs).

Each game gets ``ceil(A / block)`` blocks of ``block = min(GV_GAME_MAX_BLOCK, A rounded up
to 32)`` threads, one per agent, or, where the binding asks for H threads per agent
(:attr:`~gpu_vecenv.multi_agent.kernel_binding.GameKernelBinding.threads_per_agent`, e.g.
Tag's scan helpers, ``$GPU_VECENV_TAG_SCAN_HELPERS``), one block of ``H * A`` rounded up to
32 (at most ``GV_GAME_MAX_SPLIT_BLOCK``). A step is a fixed sequence of phases (the ``GvGamePhase``
enum of ``common/games.cuh``): one launch when a game fits one block, else one launch per
phase, so games of any size run without blocks waiting on each other. Where the binding has
a packed step (:attr:`~gpu_vecenv.multi_agent.kernel_binding.GameKernelBinding.packed_step`,
e.g. Tag's, ``$GPU_VECENV_TAG_PACKED``), a step of games of ``A <= 16`` agents may run up to
``32 // A`` games a block of one warp instead.
"""

from __future__ import annotations

import math

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.backends.compiler import KernelsUnavailable, load_module
from gpu_vecenv.backends.cuda import AUTORESET_CODES
from gpu_vecenv.backends.launch import Kernel
from gpu_vecenv.buffers import StepOutputs
from gpu_vecenv.multi_agent.buffers import GameContext
from gpu_vecenv.multi_agent.kernel_binding import PACKED_BLOCK, GameLaunch, check_consts_layout
from gpu_vecenv.multi_agent.kernel_constants import enum_values, int_constant

MAX_BLOCK = int_constant("common/games.cuh", "GV_GAME_MAX_BLOCK")
MAX_SPLIT_BLOCK = int_constant("common/games.cuh", "GV_GAME_MAX_SPLIT_BLOCK")
MAX_PACKED_AGENTS = PACKED_BLOCK // 2
"""The largest games the packed step takes (two or more a block)."""
PHASE = enum_values("common/games.cuh", "GvGamePhase")
"""Phase ids by their C names (``kValidate``, ``kMove``, ...)."""
STEP_PHASES = tuple(PHASE[p] for p in ("kValidate", "kMove", "kInteract", "kFinish",
                                       "kObserveStep"))
SAME_STEP_PHASES = tuple(PHASE[p] for p in ("kValidate", "kMove", "kInteract", "kFinish",
                                            "kFinalObs", "kSameStepReset", "kObserveStep"))
RESET_PHASES = (PHASE["kResetAgents"], PHASE["kResetGames"])
OBSERVE_PHASES = (PHASE["kObserveOnly"],)
NUM_OUTPUTS = 6
"""Output pointers of a launch: obs, reward, terminated, truncated, final_obs, active."""
_CHECKED_LAYOUTS: set[tuple[int, str]] = set()
"""``(loaded module, binding layout)`` pairs found to match (``load_module`` keeps a
module for the process, so its id stays its own)."""


class GameCudaBackend:
    """Runs ``cuda_src/<definition.name>.cu`` on the buffers of a multi-agent env."""

    name = "cuda"

    def __init__(self, env: GameContext):
        name = env.definition.name
        binding = getattr(env.definition, "kernel_binding", None)
        if binding is None:
            # under backend="auto" such an env falls back to the torch backend
            raise KernelsUnavailable(f"env {name!r} has no multi-agent CUDA kernels (its "
                                     "definition has no kernel_binding); use backend='torch'")
        if env.device.type != "cuda":
            raise RuntimeError(f"the CUDA backend needs a CUDA device, got {env.device}")
        self.env = env
        self.device = env.device
        p, b, s = env.params, env.buffers, env.buffers.state
        G, A = env.num_games, env.num_agents
        per_agent = (1 if binding.threads_per_agent is None
                     else binding.threads_per_agent(env.params, G, self.device))
        if per_agent < 1 or (per_agent > 1 and per_agent * A > MAX_SPLIT_BLOCK):
            raise ValueError(f"{per_agent} threads per agent: {A} agents get 1, or more where "
                             f"{per_agent * A} threads fit one block ({MAX_SPLIT_BLOCK})")
        limit = MAX_BLOCK if per_agent == 1 else MAX_SPLIT_BLOCK
        self.block = min(limit, 32 * math.ceil(per_agent * A / 32))
        self.blocks_per_game = math.ceil(A / self.block)
        launch = GameLaunch(self.block, self.blocks_per_game, per_agent, num_games=G)
        if G * self.blocks_per_game >= 2**31 or G * A * env.obs_dim >= 2**62:
            raise ValueError(f"{G} games of {A} agents exceed the kernel's grid")
        self.mode = AUTORESET_CODES[env.autoreset_mode]
        if binding.check_params is not None:
            binding.check_params(p)
        kernel = binding.kernel_name(p, G * self.blocks_per_game, self.device)
        packed = (binding.packed_step(p, kernel, G, self.device)
                  if binding.packed_step and per_agent == 1 and A <= MAX_PACKED_AGENTS
                  else None)
        self.games_per_step_block = 1
        """Games a block of the step's launch holds (above 1: the packed step)."""
        step_launch = launch
        if packed is not None:
            packed_kernel, self.games_per_step_block = packed
            if not 2 <= self.games_per_step_block <= PACKED_BLOCK // A:
                raise ValueError(f"a packed step holds 2 to {PACKED_BLOCK // A} games of {A} "
                                 f"agents a block, not {self.games_per_step_block}")
            step_launch = GameLaunch(PACKED_BLOCK, 1, 1, num_games=G,
                                     games_per_block=self.games_per_step_block)
        # The constants of the step's launch (they may depend on it); the other launches
        # (reset, observe, a game's phases) take the same values.
        consts, consts_format = binding.pack_constants(p, step_launch)
        self.visible = torch.zeros(G * A, dtype=torch.bool, device=self.device)
        self.scratch = binding.buffers(p, G, self.device, self.visible)
        state = [s[field] for field in binding.state_fields]
        buffers = [b.seed, b.rng_counter, b.pending, b.invalid_action, b.error_count,
                   *self.scratch]
        head = (*consts, *(t.data_ptr() for t in state), *(t.data_ptr() for t in buffers))
        module = load_module(name, self.device.index or 0, path=binding.path,
                             extra_flags=binding.flags_for(kernel))
        checked = (id(module), binding.expected_layout())
        if checked not in _CHECKED_LAYOUTS:  # read once: the copy waits for the device
            check_consts_layout(name, binding, module.read_global(f"{name}_consts_layout"))
            _CHECKED_LAYOUTS.add(checked)
        arg_format = (consts_format + "P" * (len(state) + len(buffers) + NUM_OUTPUTS) + "PP"
                      + "iiii")
        shared = (0 if binding.shared_bytes is None
                  else binding.shared_bytes(p, launch, self.device))
        self._fn = Kernel(module, kernel, arg_format, shared_bytes=shared, fixed=head)
        self._step_fn = self._fn
        """What a step launches: where a game fits one block, the binding's one-launch
        step kernel if it names one."""
        step_kernel = (binding.one_block_step(p, kernel)
                       if self.blocks_per_game == 1 and binding.one_block_step else None)
        if step_kernel is not None:
            self._step_fn = Kernel(module, step_kernel, arg_format, shared_bytes=shared,
                                   fixed=head)
        self._grid = (G * self.blocks_per_game, 1, 1)
        self._block_shape = (self.block, 1, 1)
        self._step_grid, self._step_block = self._grid, self._block_shape
        if packed is not None:
            self._step_fn = Kernel(module, packed_kernel, arg_format,
                                   shared_bytes=binding.shared_bytes(p, step_launch, self.device)
                                   if binding.shared_bytes else 0, fixed=head)
            self._step_grid = (math.ceil(G / self.games_per_step_block), 1, 1)
            self._step_block = (PACKED_BLOCK, 1, 1)
        same_step = env.autoreset_mode == AutoresetMode.SAME_STEP
        self._step_phases = SAME_STEP_PHASES if same_step else STEP_PHASES
        self._single_launch_tail = (0, self.blocks_per_game, self.mode, self._step_phases[0],
                                    self._step_phases[-1])
        """The arguments after the action of a step that is one launch (no reset mask)."""

    def _launch(self, outputs: tuple, action: int, mask: int, first: int, last: int) -> None:
        self._fn(self._grid, self._block_shape, (*outputs, action, mask, self.blocks_per_game,
                                                 self.mode, first, last))

    def _run(self, phases: tuple[int, ...], outputs: tuple, action: int = 0,
             mask: int = 0) -> None:
        if self.blocks_per_game == 1:
            self._launch(outputs, action, mask, phases[0], phases[-1])
        else:
            for phase in phases:
                self._launch(outputs, action, mask, phase, phase)

    def reset_games(self, mask: torch.Tensor) -> None:
        """Fresh games where ``mask`` ((G,) bool), from each game's RNG stream."""
        mask = mask.contiguous()
        self._run(RESET_PHASES, (0,) * NUM_OUTPUTS, mask=mask.data_ptr())

    def observe(self, visible: torch.Tensor, out: torch.Tensor) -> None:
        """``out`` ((num_envs, obs_dim)) = the observations, zero where not ``visible``."""
        self.visible.copy_(visible.reshape(-1))
        self._run(OBSERVE_PHASES, (out.data_ptr(), 0, 0, 0, 0, 0))

    def step(self, action: torch.Tensor, out: StepOutputs) -> None:
        """One step of every game, autoreset included (see ``common/games.cuh``)."""
        action = action.contiguous()  # held until the launches are queued
        outputs = out.pointers or out.data_ptrs()
        if self.blocks_per_game == 1:  # the common case in one call: see _run
            self._step_fn(self._step_grid, self._step_block, (*outputs, action.data_ptr(),
                                                              *self._single_launch_tail))
        else:
            self._run(self._step_phases, outputs, action=action.data_ptr())
