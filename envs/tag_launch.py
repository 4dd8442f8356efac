"""How continuous Tag's kernels (``cuda_src/tag.cu``) are launched: which kernel of the
file, how many threads per agent, how many games a block, how much shared memory.

These are the launch rules of :data:`gpu_vecenv.envs.tag.KERNEL_BINDING`, functions of the
params, the launch and the device (``GameKernelBinding`` calls them): every choice gives
the same results bit for bit, only the speed differs, so each rule carries the
measurements it was chosen by. ``$GPU_VECENV_TAG_SCAN_HELPERS`` and
``$GPU_VECENV_TAG_PACKED`` override two of them for A/B measurements. The rules of the
game itself, the torch reference and the binding's constants are in
:mod:`gpu_vecenv.envs.tag`.
"""

from __future__ import annotations

import os
from typing import Protocol

import torch

from gpu_vecenv.multi_agent.kernel_binding import PACKED_BLOCK, GameLaunch
from gpu_vecenv.multi_agent.kernel_constants import int_constant


class LaunchParams(Protocol):
    """What the launch rules read of :class:`gpu_vecenv.envs.tag.TagParams` (whose module
    imports these rules for its binding, so they name the fields rather than import it)."""

    @property
    def num_agents(self) -> int: ...
    @property
    def use_full_observation(self) -> bool: ...
    @property
    def num_other_agents_observed(self) -> int: ...
    @property
    def num_observed(self) -> int: ...
    @property
    def obs_dim(self) -> int: ...
    @property
    def observe_own_state(self) -> bool: ...
    @property
    def egocentric(self) -> bool: ...


MAX_OBSERVED = int_constant("tag_layout.cuh", "TAG_MAX_OBSERVED")
"""Largest K (``num_other_agents_observed``) the kernels keep (the torch reference: any)."""

MAX_SPLIT_BLOCK = int_constant("common/games.cuh", "GV_GAME_MAX_SPLIT_BLOCK")
SCAN_HELPERS_VARIABLE = "GPU_VECENV_TAG_SCAN_HELPERS"
SCAN_HELPERS_MAX_OBSERVED = int_constant("tag_layout.cuh", "TAG_SCAN_HELPERS_MAX_OBSERVED")
SCAN_MAX_PARTS = int_constant("tag_layout.cuh", "TAG_SCAN_MAX_PARTS")
"""The most threads per agent in the K-nearest scan: the agent's own and its helpers."""
SCAN_HELPERS_MIN_AGENTS = 32
"""Under ``auto``, games of fewer agents get no scan helpers: their scan is a few
candidates, which leaves the helpers' merge and extra barrier little to win back (H200,
1 game of 5 agents, measured when one kernel held both forms: 4.9 µs a step without
helpers, 5.3 with)."""


def threads_per_agent(params: LaunchParams, num_games: int, device: torch.device) -> int:
    """H, the threads per agent of the one-block step: the agent's own and ``H - 1`` scan
    helpers (``observe_partial`` in ``tag_observe.cuh``: thread ``p * A + a`` scans part ``p`` of
    agent ``a``'s candidates for its K nearest, and the agent merges the H lists), 1 for
    none. Helpers need partial observations of K <= 16 (``TAG_SCAN_HELPERS_MAX_OBSERVED``)
    and ``H * A <= GV_GAME_MAX_SPLIT_BLOCK``, H at most :data:`SCAN_MAX_PARTS`; they pay off when
    the launch has at most one block per SM (then each block's serial scan is the step's
    latency; with more blocks, the extra threads only take issue slots from other blocks)
    and the games have at least :data:`SCAN_HELPERS_MIN_AGENTS` agents: there H is the
    largest up to :data:`AUTO_SCAN_PARTS` that fits one block with the block's observation
    rows still staged in shared memory (:func:`shared_bytes`; none if even 2 does not).
    ``$GPU_VECENV_TAG_SCAN_HELPERS``:
    ``auto`` (default, that rule) or a number of helpers per agent, 0 to
    ``SCAN_MAX_PARTS - 1``, used wherever possible (as many as fit where fewer do), for A/B
    measurements; the results are bit for bit the same."""
    text = os.environ.get(SCAN_HELPERS_VARIABLE, "").strip().lower() or "auto"
    choices = [str(n) for n in range(SCAN_MAX_PARTS)]
    if text not in (*choices, "auto"):
        raise ValueError(f"{SCAN_HELPERS_VARIABLE} must be auto or a number of helpers per "
                         f"agent, {', '.join(choices)}; got {text!r}")
    fit = min(SCAN_MAX_PARTS, MAX_SPLIT_BLOCK // params.num_agents)
    if (params.use_full_observation or fit < 2
            or params.num_other_agents_observed > SCAN_HELPERS_MAX_OBSERVED):
        return 1
    if text != "auto":
        return min(int(text) + 1, fit)
    few_games = num_games <= torch.cuda.get_device_properties(device).multi_processor_count
    if not few_games or params.num_agents < SCAN_HELPERS_MIN_AGENTS:
        return 1
    limit = _shared_limit(device)
    for parts in range(min(AUTO_SCAN_PARTS, fit), 1, -1):
        block = 32 * -(-parts * params.num_agents // 32)
        if _shared_sizes(params, block, parts - 1)[1] <= limit:
            return parts
    return 1


AUTO_SCAN_PARTS = 4
"""The most threads per agent under ``auto``. H200, one graph node a step (bit for bit
alike), 1, 3 and 4 threads per agent: 100×105 (K = 10) 20.8, 13.2, 12.9 µs (15.4 with the
earlier two); 100×128 23.9, 14.6, 14.0; 132×64 15.0, 10.2, 9.3; 100×50 12.8, 9.4, 8.7;
7×33 9.9, 7.7, 7.6; games of more than 128 agents (two or three threads per agent fit,
none before): 100×150 27.6 at 1, 17.9 at 3; 100×190 33.4 at 1, 23.9 at 2; 60×170 30.3 at 1,
22.2 at 2. Where the rows are no longer staged it loses: 100×105 with K = 16 at 4
(not staged) 32.2 against 17.5 at 3; 30×200 at 2 (not staged) 38.8 against 34.3 at 1."""


ONE_BLOCK_STEP_MIN_AGENTS = 33
"""Games of at least this many agents (and no scan helpers) step through ``tag_step_<suffix>``
when they fit one block; smaller ones through ``tag_run_<suffix>``. H200, one graph node a
step: 2,000×105 103 µs against 114 (nvcc 13 for sm_90 spills 16 bytes in ``tag_step_k10``, 56
in ``tag_run_k10``); 1×5, 2,000×5 and 100×105 (helpers) 0.1-0.35 µs slower through it."""


def one_block_step_kernel(params: LaunchParams, kernel: str) -> str | None:
    """``tag_step_<suffix>``, ``step_one_block`` of ``tag_run_<suffix>`` as its own entry
    (``tag.cu``'s ``TAG_KERNELS``), for the games :data:`ONE_BLOCK_STEP_MIN_AGENTS` names;
    ``None``: ``kernel`` runs the step."""
    if params.num_agents < ONE_BLOCK_STEP_MIN_AGENTS or "_helpers" in kernel:
        return None
    return "tag_step_" + kernel.removeprefix("tag_run_")


PACKED_VARIABLE = "GPU_VECENV_TAG_PACKED"

PACKED_KERNELS = ("tag_run_full", "tag_run_k4", "tag_run_k8", "tag_run_k10", "tag_run_k16")
"""The kernels with a packed twin, ``tag_step_packed_<suffix>`` (``TAG_PACKED_KERNELS``; their
``_options`` twins too)."""


def packed_step_kernel(params: LaunchParams, kernel: str, num_games: int,
                       device: torch.device) -> tuple[str, int] | None:
    """``(tag_step_packed_<suffix>, n)``: a step of ``n`` games a block of one warp
    (``step_one_block``'s packed form in ``tag.cu``) for games of at most 16 agents (the
    backend asks only for those), ``2 <= n <= 32 // A``; ``None``: one game a block.
    ``$GPU_VECENV_TAG_PACKED``: ``auto`` (default: :func:`auto_packed_games`) or the most
    games a block, ``1`` (never packed) and up (capped at ``32 // A``), for A/B
    measurements; the results are bit for bit the same."""
    text = os.environ.get(PACKED_VARIABLE, "").strip().lower() or "auto"
    if text != "auto" and not (text.isdigit() and int(text) >= 1):
        raise ValueError(f"{PACKED_VARIABLE} must be auto or the most games a block (1: one "
                         f"game a block); got {text!r}")
    if kernel.removesuffix(OPTIONS_SUFFIX) not in PACKED_KERNELS or num_games < 2:
        return None
    games = (auto_packed_games(params.num_agents, num_games, device) if text == "auto"
             else min(int(text), PACKED_BLOCK // params.num_agents))
    if games < 2:
        return None
    return "tag_step_packed_" + kernel.removeprefix("tag_run_"), min(games, num_games)


PACKED_BLOCKS_PER_SM = 4
"""Under ``auto`` the packed step takes the fewest games a block that make its launch at
most this many blocks per SM. H200 (132 SMs), one graph node a step, the most games a block
``n`` swept (1: not packed), medians of two rounds: 5 agents, 528 games 4.67 µs at n = 1
(4.73 at 2), 800 games 5.13-5.21 at 1, 4.83-4.85 at 2; 1,320 games 5.30-5.33 at 1,
4.99-5.00 at 3; 2,000 games 5.74-5.79 at 1, 5.14-5.15 at 4 (5.23 at 6); 8,000 games 18.2 at
1, 6.53-6.55 at 6. 2 agents, 8,000 games 14.9-15.0 at 1, 4.26-4.29 at 16; 8 agents, 500
games 5.46-5.50 at 1 (5.78-5.81 at 2), 2,000 games 7.07-7.10 at 1, 6.32-6.33 at 4; 16
agents, 2,000 games 10.1-10.2 at 1, 9.01 at 2. In every size measured the rule's choice was
within 4 % of the best ``n``."""


def auto_packed_games(agents: int, num_games: int, device: torch.device) -> int:
    """Games a block of the packed step under ``auto`` (1: not packed): the fewest that
    make the launch at most :data:`PACKED_BLOCKS_PER_SM` blocks per SM, at most
    ``32 // agents``. Few games keep one a block: a packed block's step is longer (its
    copy of the observation rows and the paths its games take apart), which pays only
    where one game a block would put more blocks on an SM than run at once without
    waiting on each other."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return min(PACKED_BLOCK // agents, -(-num_games // (PACKED_BLOCKS_PER_SM * sms)))


OPTIONS_SUFFIX = "_options"
"""The kernels that write the observation options (``observe_own_state``, ``egocentric``)
end in this; the others hold none of their code (``tag.cu``: they kept their registers)."""


def kernel_name(params: LaunchParams, blocks: int, device: torch.device) -> str:
    """``tag_run_full`` or ``tag_run_k<kMax>[_wide|_helpers]`` (partial, K <= kMax), with
    :data:`OPTIONS_SUFFIX` where the params ask for an observation option. The wide scan
    pays off when the launch has too few blocks to fill the GPU and its games are larger
    than a block; ``_helpers`` where :func:`threads_per_agent` gives each agent scan helpers
    (one block per game: ``blocks`` is the number of games)."""
    options = OPTIONS_SUFFIX if params.observe_own_state or params.egocentric else ""
    if params.use_full_observation:
        return "tag_run_full" + options
    k_max = next(k for k in (4, 8, 10, 16, MAX_OBSERVED) if params.num_other_agents_observed <= k)
    if threads_per_agent(params, blocks, device) > 1:
        return f"tag_run_k{k_max}_helpers" + options
    few_blocks = blocks < 2 * torch.cuda.get_device_properties(device).multi_processor_count
    wide = "_wide" if few_blocks and params.num_agents > 256 else ""
    return f"tag_run_k{k_max}{wide}{options}"


STAGE_LIMIT_BYTES = 100 * 1024
"""The most dynamic shared memory a block takes when it stages its observation rows."""


def shared_bytes(params: LaunchParams, launch: GameLaunch, device: torch.device) -> int:
    """Dynamic shared memory per block of the Tag kernels (``TagShared`` in ``tag_layout.cuh``):
    per thread two float4 tile entries and an int (the tags per tagger of a game that fits
    one block), with scan helpers ``H * K * A`` floats and ints (each part's list, H threads
    per agent), plus, where :func:`stages_rows` and it fits under
    :data:`STAGE_LIMIT_BYTES` and the device's opt-in limit, a row of ``obs_dim | 1``
    floats per agent of the block for staging its observation rows (so the block writes
    them to global memory as one contiguous span)."""
    base, staged = _shared_sizes(params, launch.block, launch.threads_per_agent - 1,
                                 launch.games_per_block)
    if not stages_rows(launch, device):
        return base
    return staged if staged <= _shared_limit(device) else base


def stages_rows(launch: GameLaunch, device: torch.device) -> bool:
    """Whether a launch stages its observation rows in shared memory (where they fit): all
    but launches of one game a warp (``launch.block <= 32``, one game a block) with at most
    :data:`PACKED_BLOCKS_PER_SM` blocks per SM, which write their rows straight to global
    memory. There the staged copy (a barrier and the block's passes over its rows) is on
    the critical path of a short step, and the rows' uncoalesced stores are few. H200, one
    graph node a step, two rounds, staged against straight: 5 agents, 1 game 3.95-4.13 µs
    against 3.91; 132 games 4.56-4.59 against 4.32-4.33; 528 games 4.71-4.72 against
    4.46-4.52; 16 agents, 1 game 6.33 against 5.66, 132 games 6.83 against 6.58-6.61.
    Elsewhere straight rows lose: 2,000 games of 5 (four a warp) 5.08 against 7.40-7.50, 64
    agents 7.76-7.79 against 14.2-14.3, 100 × 105 11.30-11.31 against 25.3."""
    if launch.block > 32 or launch.games_per_block != 1 or launch.blocks_per_game != 1:
        return True
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return launch.num_games > PACKED_BLOCKS_PER_SM * sms


def _shared_sizes(params: LaunchParams, block: int, helpers: int,
                  games: int = 1) -> tuple[int, int]:
    """``(bytes without the staged rows, bytes with them)`` of a block of ``block`` threads
    with ``helpers`` scan helpers per agent, holding ``games`` games (the packed step's
    blocks: the rows of them all)."""
    helped = (helpers + 1 if helpers else 0) * params.num_observed * params.num_agents
    base = block * (2 * 16 + 4) + helped * (4 + 4)
    return base, base + min(block, games * params.num_agents) * (params.obs_dim | 1) * 4


def _shared_limit(device: torch.device) -> int:
    """The most dynamic shared memory a staging block takes on ``device``."""
    props = torch.cuda.get_device_properties(device)
    return min(STAGE_LIMIT_BYTES, getattr(props, "shared_memory_per_block_optin", 48 * 1024))
