"""The Tag kernels (cuda_src/tag.cu, tag_grid.cu) against the torch reference on the GPU.

- State injection: random states (with runners out of the game, pending autoresets, games
  on their last step, crowds of runners around taggers so that many are tagged in one
  step, ~2% invalid actions) written into both backends, one step compared, in every
  autoreset mode, for one block per game and several blocks per game.
- Whole roll-outs from the same seed, step by step, from 1 x 2 up to 2,000 x 1,000 and
  1 x 16,384 agents (partial observations at the large sizes: a full observation of a
  1,000-agent game is 7,000 floats per agent).
- Determinism: the same seed twice gives bit-identical outputs.
- The observation options (``observe_own_state``, ``egocentric``: the ``_options`` kernels)
  by state injection and roll-outs as above, and their observations bit for bit.

Floats are held to 1e-5 (cos/sin may differ in the last bit between torch's and our
build of CUDA's libm); flags, in-game flags, counters and positions on the grid exactly.
"""

from __future__ import annotations

import math

import pytest
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.envs import tag_launch
from gpu_vecenv.multi_agent.kernel_binding import GameLaunch
from tests.tag.makers import make_tag, make_tag_grid

pytestmark = pytest.mark.gpu

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
ATOL = 1e-5


def make_pair(cls, games, **kwargs):
    common = dict(device="cuda", strict=False, **kwargs)
    return cls(games, backend="cuda", **common), cls(games, backend="torch", **common)


OPTIONS = {"own_state": dict(observe_own_state=True), "egocentric": dict(egocentric=True),
           "both": dict(observe_own_state=True, egocentric=True)}
"""The observation options, as ``tag_params`` keyword arguments."""


def tag_params(agents, full, taggers=None, **options):
    taggers = taggers or max(1, agents // 10)
    params = dict(num_taggers=taggers, num_runners=agents - taggers, grid_length=10.0,
                  tagging_distance=0.05, use_full_observation=full, episode_length=40,
                  edge_hit_penalty=-0.1, step_penalty_for_tagger=-0.01,
                  step_reward_for_runner=0.01, **options)
    if not full:
        params["num_other_agents_observed"] = min(10, agents - 1)
    return params


def random_tag_state(env, gen):
    p, G, A = env.params, env.num_games, env.num_agents
    dev = env.device

    def uniform(lo, hi, shape=(G, A)):
        return lo + (hi - lo) * torch.rand(shape, generator=gen, device=dev)

    x, y = uniform(0, p.grid_length), uniform(0, p.grid_length)
    # A third of the runners crowd around a random tagger: many tags in one step.
    T = p.num_taggers
    crowd = torch.rand((G, A), generator=gen, device=dev) < 0.33
    crowd[:, :T] = False
    which = torch.randint(0, T, (G, A), generator=gen, device=dev)
    near = p.tag_threshold * 1.5
    x = torch.where(crowd, torch.gather(x, 1, which) + uniform(-near, near), x)
    y = torch.where(crowd, torch.gather(y, 1, which) + uniform(-near, near), y)
    x, y = x.clamp(0, p.grid_length), y.clamp(0, p.grid_length)
    in_game = (torch.rand((G, A), generator=gen, device=dev) < 0.8).int()
    in_game[:, :T] = 1
    in_game[torch.rand(G, generator=gen, device=dev) < 0.1, T:] = 0  # no runner left
    return {
        "x": x, "y": y, "speed": uniform(0, p.max_speed) * in_game,
        "direction": uniform(0, 2 * math.pi) * in_game,
        "acceleration": uniform(-0.5, 0.5) * in_game, "in_game": in_game,
        "t": torch.randint(p.episode_length - 3, p.episode_length, (G,), generator=gen,
                           device=dev, dtype=torch.int32),
        "autoreset_pending": torch.rand(G, generator=gen, device=dev) < 0.2,
        "rng_counter": torch.randint(0, 5, (G,), generator=gen, device=dev),
    }


def random_actions(env, gen, invalid=0.0):
    space = env.single_action_space
    if hasattr(space, "nvec"):
        nvec = torch.as_tensor(space.nvec, device=env.device)
        a = (torch.rand((env.num_envs, len(nvec)), generator=gen, device=env.device)
             * nvec).long()
    else:
        a = torch.randint(0, int(space.n), (env.num_envs,), generator=gen, device=env.device)
    if invalid:
        bad = torch.rand(a.shape[:1], generator=gen, device=env.device) < invalid
        if a.dim() == 1:
            a[bad] = -1
        else:
            a[bad, 0] = 99
    return a


def assert_same(got, want, what):
    if got.dtype.is_floating_point:
        diff = (got - want).abs()
        assert torch.all(diff <= ATOL), f"{what}: max diff {diff.max().item():.3g}"
    else:
        mismatch = (got != want).nonzero()
        assert mismatch.numel() == 0, f"{what}: {len(mismatch)} differ, first {mismatch[:3]}"


def _step_outputs(out):
    """Clones of a step's obs, reward, terminated, truncated, active (and final_obs)."""
    obs, reward, terminated, truncated, info = out
    parts = [obs, reward, terminated, truncated, info["active"]]
    if "final_obs" in info:
        parts.append(info["final_obs"])
    return [p.clone() for p in parts]


def assert_same_rollouts(on, off, seed, steps=80):
    """Two CUDA envs of one game under two launch forms step alike, bit for bit: outputs,
    state, invalid-action flags and error counts, over ``steps`` steps of random actions
    (invalid ones every third step) with an injected state every 20 (crowds, runners out,
    pending resets, last steps)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    for first, second in zip(on.reset(seed=7), off.reset(seed=7), strict=False):
        if isinstance(first, torch.Tensor):
            assert torch.equal(first, second)
    for step in range(steps):
        if step % 20 == 10:
            state = random_tag_state(off, gen)
            assert torch.equal(on.set_state(state), off.set_state(state))
        actions = random_actions(off, gen, invalid=0.02 if step % 3 == 0 else 0.0)
        got, want = _step_outputs(on.step(actions)), _step_outputs(off.step(actions))
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a, b), f"step {step}"
        state_on, state_off = on.get_state(), off.get_state()
        for key in state_off:
            assert torch.equal(state_on[key], state_off[key]), f"step {step} {key}"
        assert torch.equal(on.buffers.invalid_action, off.buffers.invalid_action)
        # counted alike; zeroed, so that step() never raises the deferred error
        assert torch.equal(on.buffers.error_count, off.buffers.error_count), f"step {step}"
        on.buffers.error_count.zero_()
        off.buffers.error_count.zero_()


def assert_matches_reference(cuda, params, steps=60):
    """A CUDA Tag env made with ``params`` against the torch backend with the same ones,
    from ``reset(seed=5)``, ``steps`` steps of random actions (1 % invalid)."""
    ref = make_tag(cuda.num_games, device="cuda", backend="torch", strict=False,
                   autoreset_mode=cuda.autoreset_mode, **params)
    gen = torch.Generator(device="cuda").manual_seed(3)
    cuda.reset(seed=5)
    ref.reset(seed=5)
    for step in range(steps):
        compare_step(cuda, ref, random_actions(ref, gen, invalid=0.01), f"step {step}")


def compare_step(cuda, ref, actions, label):
    out_c = cuda.step(actions)
    out_r = ref.step(actions)
    for name, c, r in zip(("obs", "reward", "terminated", "truncated"), out_c, out_r,
                          strict=False):
        assert_same(c, r, f"{label} {name}")
    if "final_obs" in out_r[4]:
        assert_same(out_c[4]["final_obs"], out_r[4]["final_obs"], f"{label} final_obs")
    assert_same(out_c[4]["active"], out_r[4]["active"], f"{label} active")
    state_c, state_r = cuda.get_state(), ref.get_state()
    for key in state_r:
        assert_same(state_c[key], state_r[key], f"{label} state {key}")
    assert_same(cuda.buffers.error_count, ref.buffers.error_count, f"{label} error count")
    assert_same(cuda.buffers.invalid_action, ref.buffers.invalid_action, f"{label} invalid")
    cuda.buffers.error_count.zero_()
    ref.buffers.error_count.zero_()
    return out_r


SIZES = [(1, 2), (64, 11), (16, 105), (6, 300), (2, 1000)]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("full", [True, False], ids=["full", "partial"])
@pytest.mark.parametrize(("games", "agents"), SIZES)
def test_tag_state_injection(games, agents, full, mode):
    cuda, ref = make_pair(make_tag, games, autoreset_mode=mode, **tag_params(agents, full))
    gen = torch.Generator(device="cuda").manual_seed(games * 7919 + agents)
    cuda.reset(seed=3)
    ref.reset(seed=3)
    for trial in range(4):
        state = random_tag_state(ref, gen)
        obs_c, obs_r = cuda.set_state(state), ref.set_state(state)
        assert_same(obs_c, obs_r, "set_state obs")
        actions = random_actions(ref, gen, invalid=0.02 if trial % 2 else 0.0)
        compare_step(cuda, ref, actions, f"trial {trial}")
        compare_step(cuda, ref, random_actions(ref, gen), f"trial {trial} second step")


@pytest.mark.parametrize(("games", "agents", "full", "steps", "options"), [
    (1, 2, True, 300, None), (256, 11, True, 120, None), (64, 11, False, 120, None),
    (20, 300, False, 60, None), (8, 200, True, 30, None), (2000, 1000, False, 3, None),
    (1, 16384, False, 5, None),
    (1, 2, True, 300, "own_state"), (256, 11, True, 120, "both"),
    (64, 11, False, 120, "egocentric"), (64, 11, False, 120, "both"),
    (20, 300, False, 60, "both"), (8, 200, True, 30, "both"), (100, 105, False, 60, "both"),
])
def test_tag_rollout_matches_reference(games, agents, full, steps, options):
    params = tag_params(agents, full, taggers=16 if agents == 16384 else None,
                        **OPTIONS.get(options, {}))
    params["episode_length"] = 25
    cuda, ref = make_pair(make_tag, games, **params)
    gen = torch.Generator(device="cuda").manual_seed(1)
    assert_same(cuda.reset(seed=5)[0], ref.reset(seed=5)[0], "reset obs")
    ended = 0
    for step in range(steps):
        out = compare_step(cuda, ref, random_actions(ref, gen), f"step {step}")
        ended += int((out[2] | out[3]).sum())
    assert steps < 25 or ended > 0


OPTION_CASES = [  # games, agents, full, mode, options: both in every mode, each alone once
    *[(g, a, full, mode, "both") for g, a in ((1, 2), (64, 11), (16, 105), (6, 300))
      for full in (True, False) for mode in MODES],
    *[(g, a, full, AutoresetMode.NEXT_STEP, alone) for g, a in ((64, 11), (16, 105))
      for full in (True, False) for alone in ("own_state", "egocentric")]]


@pytest.mark.parametrize(("games", "agents", "full", "mode", "options"), OPTION_CASES)
def test_tag_options_state_injection(games, agents, full, mode, options):
    """The ``_options`` kernels (one block a game through ``run()`` or, at 105 agents,
    ``tag_step_*``; two blocks a game at 300) against the reference, as
    ``test_tag_state_injection``: runners out of the game, crowds, resets, last steps."""
    params = tag_params(agents, full, **OPTIONS[options])
    cuda, ref = make_pair(make_tag, games, autoreset_mode=mode, **params)
    assert cuda.backend._fn.name.endswith(tag_launch.OPTIONS_SUFFIX)
    gen = torch.Generator(device="cuda").manual_seed(games * 7919 + agents + 1)
    cuda.reset(seed=3)
    ref.reset(seed=3)
    for trial in range(4):
        state = random_tag_state(ref, gen)
        assert_same(cuda.set_state(state), ref.set_state(state), "set_state obs")
        actions = random_actions(ref, gen, invalid=0.02 if trial % 2 else 0.0)
        compare_step(cuda, ref, actions, f"trial {trial}")
        compare_step(cuda, ref, random_actions(ref, gen), f"trial {trial} second step")


def assert_bits(got, want, what):
    """Equal bit for bit (floats through their int32 view: the signs of zeros count)."""
    if got.dtype == torch.float32:
        got, want = got.view(torch.int32), want.view(torch.int32)
    mismatch = (got != want).nonzero()
    assert mismatch.numel() == 0, f"{what}: {len(mismatch)} differ, first {mismatch[:3]}"


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize(("games", "agents", "full", "helpers", "packed"), [
    (64, 11, True, "0", "1"), (64, 11, False, "0", "1"), (16, 105, False, "0", "1"),
    (16, 105, True, "0", "1"), (6, 300, False, "0", "1"), (8, 105, False, "3", "1"),
    (7, 33, False, "1", "1"), (2000, 5, False, "0", "32"), (40, 11, True, "0", "32")])
def test_tag_options_observations_bit_for_bit(games, agents, full, helpers, packed, mode,
                                              monkeypatch):
    """The kernel's cos·Δx + sin·Δy, cos·Δy − sin·Δx (each product rounded) and own state
    are the reference's bit for bit, signs of zeros included, in every launch form: an
    observation of injected states (``observe()``'s launch), then the steps' observations
    (one block a game, ``tag_step_*``, two blocks a game, scan helpers, packed games), whose
    states must first be the same bits (their moves use cosf and sinf too)."""
    monkeypatch.setenv(tag_launch.SCAN_HELPERS_VARIABLE, helpers)
    monkeypatch.setenv(tag_launch.PACKED_VARIABLE, packed)
    params = tag_params(agents, full, **OPTIONS["both"])
    cuda, ref = make_pair(make_tag, games, autoreset_mode=mode, **params)
    if helpers != "0":
        assert cuda.backend._fn.name.endswith("_helpers" + tag_launch.OPTIONS_SUFFIX)
    if packed != "1":
        assert cuda.backend.games_per_step_block > 1
    gen = torch.Generator(device="cuda").manual_seed(games + agents)
    cuda.reset(seed=3)
    ref.reset(seed=3)
    for trial in range(3):
        state = random_tag_state(ref, gen)
        assert_bits(cuda.set_state(state), ref.set_state(state), f"trial {trial} set_state obs")
        for step in range(3):
            actions = random_actions(ref, gen)
            out_c, out_r = cuda.step(actions), ref.step(actions)
            label = f"trial {trial} step {step}"
            state_c, state_r = cuda.get_state(), ref.get_state()
            for key in state_r:
                assert_bits(state_c[key], state_r[key], f"{label} state {key}")
            assert_bits(out_c[0], out_r[0], f"{label} obs")
            if "final_obs" in out_r[4]:
                assert_bits(out_c[4]["final_obs"], out_r[4]["final_obs"], f"{label} final_obs")


def test_tag_many_tags_and_determinism():
    params = tag_params(300, False)
    params.update(tagging_distance=0.2, grid_length=5.0)
    runs = []
    for _ in range(2):
        env = make_tag(16, device="cuda", backend="cuda", copy=False, **params)
        env.reset(seed=9)
        gen = torch.Generator(device="cuda").manual_seed(2)
        tags = 0
        outs = []
        for _ in range(30):
            obs, reward, terminated, truncated, _ = env.step(random_actions(env, gen))
            tags += int(terminated.view(16, 300)[:, params["num_taggers"]:].sum())
            outs.append(torch.cat([obs.flatten(), reward, terminated.float(),
                                   truncated.float()]).clone())
        runs.append(torch.stack(outs))
        assert tags > 100
    assert torch.equal(runs[0], runs[1])


GRID_SIZES = [(1, 2), (2000, 5), (16, 11), (4, 300)]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("full", [True, False], ids=["full", "partial"])
@pytest.mark.parametrize(("games", "agents"), GRID_SIZES)
def test_grid_state_injection_and_rollout(games, agents, full, mode):
    params = dict(num_taggers=agents - 1, grid_length=6, episode_length=30,
                  use_full_observation=full, random_start=True)
    cuda, ref = make_pair(make_tag_grid, games, autoreset_mode=mode, **params)
    gen = torch.Generator(device="cuda").manual_seed(games + agents)
    assert_same(cuda.reset(seed=4)[0], ref.reset(seed=4)[0], "reset obs")
    for step in range(60):
        compare_step(cuda, ref, random_actions(ref, gen, invalid=0.01), f"step {step}")
    G, A = games, agents
    state = {"x": torch.randint(0, 7, (G, A), generator=gen, device="cuda", dtype=torch.int32),
             "y": torch.randint(0, 7, (G, A), generator=gen, device="cuda", dtype=torch.int32),
             "t": torch.randint(25, 30, (G,), generator=gen, device="cuda", dtype=torch.int32),
             "autoreset_pending": torch.rand(G, generator=gen, device="cuda") < 0.2}
    assert_same(cuda.set_state(state), ref.set_state(state), "set_state obs")
    compare_step(cuda, ref, random_actions(ref, gen), "injected")


def test_grid_fixed_start_and_reset_mask():
    cuda, ref = make_pair(make_tag_grid, 50, autoreset_mode=AutoresetMode.DISABLED)
    gen = torch.Generator(device="cuda").manual_seed(0)
    cuda.reset(seed=1)
    ref.reset(seed=1)
    for _ in range(5):
        compare_step(cuda, ref, random_actions(ref, gen), "step")
    mask = torch.rand(50, generator=gen, device="cuda") < 0.5
    assert_same(cuda.reset(options={"reset_mask": mask})[0],
                ref.reset(options={"reset_mask": mask})[0], "masked reset")
    assert_same(cuda.get_state()["x"], ref.get_state()["x"], "x after masked reset")


def test_invalid_actions_reported_without_sync():
    from gpu_vecenv.actions import InvalidActionError
    from gpu_vecenv.multi_agent import ERROR_FLAG_INTERVAL

    env = make_tag(4, device="cuda", backend="cuda", num_runners=3)
    assert not env.strict
    env.reset(seed=0)
    good = torch.zeros((env.num_envs, 2), dtype=torch.int64, device="cuda")
    bad = good.clone()
    bad[5, 1] = 99
    before = env.get_state()
    env.step(bad)
    after = env.get_state()
    assert torch.equal(after["x"][1], before["x"][1]) and after["t"].tolist() == [1, 0, 1, 1]
    with pytest.raises(InvalidActionError):
        for _ in range(ERROR_FLAG_INTERVAL + 2):
            env.step(good)
            torch.cuda.synchronize()
    env.step(bad)
    with pytest.raises(InvalidActionError, match="slots \\[5\\]"):
        env.check_errors()


def test_a_binding_that_disagrees_with_its_kernel_file_fails_at_load():
    """The constants the module packs are checked against the table the .cu exports."""
    from dataclasses import replace

    from gpu_vecenv.envs import tag_grid
    from gpu_vecenv.multi_agent import MultiAgentVectorEnv

    make_tag_grid(2, device="cuda", backend="cuda")  # the right binding loads
    swapped = tag_grid.KERNEL_BINDING.constants
    swapped = (swapped[1], swapped[0], *swapped[2:])
    definition = replace(tag_grid.DEFINITION,
                         kernel_binding=replace(tag_grid.KERNEL_BINDING, constants=swapped))
    with pytest.raises(RuntimeError, match="differ at field 0: the kernel file declares "
                                           "'int num_agents', the binding packs "
                                           "'int grid_length'"):
        MultiAgentVectorEnv(definition, 2, device="cuda", backend="cuda")



def test_envs_sharing_a_kernel_with_different_shared_memory_both_step(monkeypatch):
    # The limit on a kernel's dynamic shared memory belongs to the function, not to one
    # env's launch: making a second env that needs less must not lower it below the
    # first's (its launches then failed with CUDA_ERROR_INVALID_VALUE).
    monkeypatch.setenv("GPU_VECENV_TAG_SCAN_HELPERS", "0")
    envs = []
    for agents in (128, 120):  # staged rows of K = 16 observations: both above 48 KiB
        params = tag_params(agents, full=False)
        params["num_other_agents_observed"] = 16
        envs.append(make_tag(2, device="cuda", backend="cuda", **params))
    big, small = envs
    assert big.backend._fn.name == small.backend._fn.name
    assert big.backend._fn.shared_bytes > small.backend._fn.shared_bytes > 48 * 1024
    gen = torch.Generator(device="cuda").manual_seed(0)
    for env in (big, small, big):
        env.reset(seed=0)
        env.step(random_actions(env, gen))
    torch.cuda.synchronize()


@pytest.mark.parametrize(("games", "agents", "full", "mode", "options"), [
    (1, 5, False, AutoresetMode.NEXT_STEP, None), (3, 16, True, AutoresetMode.SAME_STEP, None),
    (40, 24, False, AutoresetMode.DISABLED, None), (1, 5, False, AutoresetMode.SAME_STEP, "both"),
    (3, 16, True, AutoresetMode.NEXT_STEP, "both")])
def test_one_game_a_warp_writes_its_rows_straight_with_the_staged_results(
        monkeypatch, games, agents, full, mode, options):
    # Launches of one game a warp on few blocks write the observation rows straight to
    # global memory (tag_launch.stages_rows); staged, the same step gives the same bits.
    # (The options' kernels turn and extend the rows they wrote: in global memory here.)
    params = tag_params(agents, full, **OPTIONS.get(options, {}))
    kwargs = dict(device="cuda", backend="cuda", autoreset_mode=mode, strict=False, **params)
    straight = make_tag(games, **kwargs)
    launch = GameLaunch(straight.backend.block, 1, num_games=games)
    assert not tag_launch.stages_rows(launch, straight.device)
    base = tag_launch.shared_bytes(straight.params, launch, straight.device)
    assert straight.backend._fn.shared_bytes == base
    monkeypatch.setattr(tag_launch, "stages_rows", lambda launch, device: True)
    staged = make_tag(games, **kwargs)
    assert staged.backend._fn.shared_bytes > base
    assert_same_rollouts(straight, staged, seed=games)
    assert_matches_reference(straight, params)


def test_many_games_a_warp_and_larger_blocks_stage_their_rows():
    device = torch.device("cuda")
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    many = tag_launch.PACKED_BLOCKS_PER_SM * sms + 1
    assert tag_launch.stages_rows(GameLaunch(32, 1, num_games=many), device)
    assert tag_launch.stages_rows(GameLaunch(32, 1, num_games=many, games_per_block=4), device)
    assert tag_launch.stages_rows(GameLaunch(32, 1, num_games=2, games_per_block=2), device)
    assert tag_launch.stages_rows(GameLaunch(64, 1, num_games=1), device)
    assert not tag_launch.stages_rows(GameLaunch(32, 1, num_games=many - 1), device)
